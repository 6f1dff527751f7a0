// A minimal JupyterLab 4 notebook page made of the packages the application is made of, as
// jupyterlab's examples/notebook assembles them, with jupyterlab_widgets' plugins activated
// as the application activates them (the manager plugin, then the base, controls and output
// widget plugins). It opens the notebook named by ?path= with the server's kernel API and
// exposes window.godistPage for the browser test (cmd/godist/browser_lab_test.go).
import { PageConfig } from '@jupyterlab/coreutils';
import { ServiceManager } from '@jupyterlab/services';
import { DocumentManager } from '@jupyterlab/docmanager';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import {
  NotebookActions,
  NotebookModelFactory,
  NotebookPanel,
  NotebookTracker,
  NotebookWidgetFactory,
  StaticNotebook,
  runCell,
  setCellExecutor
} from '@jupyterlab/notebook';
import { RenderMimeRegistry, standardRendererFactories } from '@jupyterlab/rendermime';
import {
  CodeMirrorEditorFactory,
  CodeMirrorMimeTypeService,
  EditorExtensionRegistry,
  EditorLanguageRegistry,
  EditorThemeRegistry,
  ybinding
} from '@jupyterlab/codemirror';
import { CommandRegistry } from '@lumino/commands';
import { Widget } from '@lumino/widgets';
import {
  baseWidgetsPlugin,
  controlWidgetsPlugin,
  managerPlugin,
  outputWidgetPlugin
} from '@jupyter-widgets/jupyterlab-manager/lib/plugin';
import { installRecorder, probe } from '../recorder.js';

import '@jupyterlab/theme-light-extension/style/variables.css';
import '@jupyterlab/theme-light-extension/style/theme.css';
import '@jupyterlab/notebook/style/index.js';

async function main() {
  const query = new URLSearchParams(location.search);
  PageConfig.setOption('baseUrl', '/');
  PageConfig.setOption('token', query.get('token') || '');
  const path = query.get('path');

  const manager = new ServiceManager();
  await manager.ready;

  // The cell executor the notebook extension's cell-executor plugin provides.
  setCellExecutor(Object.freeze({ runCell }));
  const rendermime = new RenderMimeRegistry({ initialFactories: standardRendererFactories });
  // The application's plugin system: the widget manager plugin gets the rendermime registry
  // and the notebook tracker, and the widget modules register with what it provides.
  const app = { commands: new CommandRegistry(), shell: { widgets: () => [] } };
  const tracker = new NotebookTracker({ namespace: 'notebook' });
  const registry = managerPlugin.activate(app, rendermime, tracker, null, null, null, null, null);
  for (const plugin of [baseWidgetsPlugin, controlWidgetsPlugin, outputWidgetPlugin]) {
    plugin.activate(app, registry);
  }

  const docRegistry = new DocumentRegistry();
  const opener = {
    open: () => {},
    get opened() {
      return { connect: () => false, disconnect: () => false };
    }
  };
  const docManager = new DocumentManager({ registry: docRegistry, manager, opener });
  const languages = new EditorLanguageRegistry();
  const extensions = new EditorExtensionRegistry();
  const themes = new EditorThemeRegistry();
  EditorThemeRegistry.getDefaultThemes().forEach(theme => themes.addTheme(theme));
  EditorExtensionRegistry.getDefaultExtensions({ themes }).forEach(f => extensions.addExtension(f));
  extensions.addExtension({
    name: 'shared-model-binding',
    factory: options => EditorExtensionRegistry.createImmutableExtension(
      ybinding({ ytext: options.model.sharedModel.ysource, undoManager: options.model.sharedModel.undoManager ?? undefined }))
  });
  const editorFactory = new CodeMirrorEditorFactory({ extensions, languages });
  const wFactory = new NotebookWidgetFactory({
    name: 'Notebook',
    modelName: 'notebook',
    fileTypes: ['notebook'],
    defaultFor: ['notebook'],
    preferKernel: true,
    canStartKernel: true,
    rendermime,
    contentFactory: new NotebookPanel.ContentFactory({ editorFactory: editorFactory.newInlineEditor }),
    mimeTypeService: new CodeMirrorMimeTypeService(languages),
    notebookConfig: { ...StaticNotebook.defaultNotebookConfig, windowingMode: 'none' }
  });
  docRegistry.addModelFactory(new NotebookModelFactory({}));
  docRegistry.addWidgetFactory(wFactory);

  const panel = docManager.open(path);
  panel.id = 'main';
  panel.addClass('jp-ThemedContainer');
  Widget.attach(panel, document.body);
  window.addEventListener('resize', () => panel.update());
  void tracker.add(panel);

  const notebook = panel.content;
  const sessionContext = panel.sessionContext;
  const page = {
    panel,
    container: notebook.node,
    outputSelector: '.jp-OutputArea',
    cells: () => notebook.widgets.map(cell => {
      const count = cell.model.executionCount;
      const prompt = cell.node.querySelector('.jp-InputArea-prompt');
      return {
        el: cell.node,
        prompt: count != null ? count : prompt && prompt.textContent.includes('*') ? '*' : null,
        outputs: cell.model.outputs ? cell.model.outputs.toJSON() : []
      };
    }),
    cellNode: i => notebook.widgets[i].node,
    // What the test waits for: the notebook, its kernel and a widget manager attached to it.
    state: () => {
      if (!panel.context.isReady) return 'loading';
      const kernel = sessionContext.session && sessionContext.session.kernel;
      if (!kernel || kernel.connectionStatus !== 'connected') return 'no kernel';
      if (kernel.name !== 'godist') return 'kernel ' + kernel.name;
      if (!page.recording) return 'no recorder';
      return 'ready';
    },
    // execute runs cell i as Shift-Enter on it does.
    execute: i => {
      notebook.activeCellIndex = i;
      notebook.deselectAll();
      void NotebookActions.run(notebook, sessionContext);
      return true;
    },
    probe: code => probe(sessionContext.session.kernel, code),
    save: () => panel.context.save().then(() => true)
  };
  window.godistPage = page;
  await panel.context.ready;
  installRecorder(page);
  page.recording = true;
}

window.addEventListener('load', () => {
  main().catch(err => {
    console.error('godist page:', err);
    window.godistPageError = String(err && err.stack || err);
  });
});
