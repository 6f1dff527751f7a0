// ipywidgets 7's HTML manager (@jupyter-widgets/html-manager 0.20) on a @jupyterlab/services
// kernel connection, driven as VS Code's notebook renderer drives it for a non-Python kernel:
// the manager's comms are the kernel connection's comms (as ipywidgets' examples/web3 wires
// them), each cell's display_data widget views are rendered into its outputs, every
// execute_request carries VS Code's metadata {cellId: "vscode-notebook-cell:..."}, and the
// manager never opens jupyter.widget.control (VS Code does not load widget state from the
// kernel). It opens the notebook named by ?path= and exposes window.godistPage for the
// browser test (cmd/godist/browser_lab_test.go).
import './jquery-global.js';
import './jquery-ui-deps.js';
import * as base from '@jupyter-widgets/base';
// The manager itself (the package's index also brings the embedding script, which needs webpack).
import { HTMLManager } from '@jupyter-widgets/html-manager/lib/htmlmanager';
import { ServerConnection, ServiceManager } from '@jupyterlab/services';
import { installRecorder, probe } from '../recorder.js';

import '@jupyter-widgets/controls/css/widgets.css';
import '@jupyter-widgets/html-manager/css/output.css';

const WIDGET_VIEW = 'application/vnd.jupyter.widget-view+json';

class KernelWidgetManager extends HTMLManager {
  constructor(kernel) {
    super();
    this.kernel = kernel;
    kernel.registerCommTarget(this.comm_target_name, async (comm, msg) => {
      await this.handle_comm_open(new base.shims.services.Comm(comm), msg);
    });
  }

  async _create_comm(targetName, modelId, data, metadata) {
    const comm = this.kernel.createComm(targetName, modelId);
    if (data || metadata) {
      comm.open(data, metadata);
    }
    return new base.shims.services.Comm(comm);
  }

  _get_comm_info() {
    return this.kernel.requestCommInfo({ target_name: this.comm_target_name }).then(reply => reply.content.comms);
  }
}

async function main() {
  const query = new URLSearchParams(location.search);
  const path = query.get('path');
  const serverSettings = ServerConnection.makeSettings({
    baseUrl: location.origin + '/',
    token: query.get('token') || ''
  });
  const services = new ServiceManager({ serverSettings });
  await services.ready;
  const nb = (await services.contents.get(path, { type: 'notebook', content: true })).content;

  const root = document.getElementById('notebook');
  const cells = nb.cells.filter(c => c.cell_type === 'code').map((c, i) => {
    const el = document.createElement('div');
    el.className = 'cell';
    const prompt = document.createElement('div');
    prompt.className = 'prompt';
    const input = document.createElement('pre');
    input.className = 'input';
    input.textContent = Array.isArray(c.source) ? c.source.join('') : c.source;
    const outputs = document.createElement('div');
    outputs.className = 'outputs';
    el.append(prompt, input, outputs);
    root.append(el);
    // VS Code's cell URI: the notebook's URI with the cell's fragment.
    const cellId = 'vscode-notebook-cell:/home/student/' + encodeURI(path) + '#W' + i + 'sZmlsZQ%3D%3D';
    return { el, prompt, outputs, cellId, count: null, running: false, data: [] };
  });

  const session = await services.sessions.startNew({
    path, type: 'notebook', name: path,
    kernel: { name: nb.metadata.kernelspec.name }
  });
  const kernel = session.kernel;
  // Every comm this page opens, by target: the test checks the control comm is not one.
  const commsOpened = [];
  const createComm = kernel.createComm.bind(kernel);
  kernel.createComm = (target, id) => {
    commsOpened.push(target);
    return createComm(target, id);
  };
  const manager = new KernelWidgetManager(kernel);

  const render = (cell, msg) => {
    const c = msg.content;
    const type = msg.header.msg_type;
    const div = document.createElement('div');
    div.className = 'output';
    if (type === 'stream') {
      div.className += ' stream';
      div.textContent = c.text;
      cell.data.push({ output_type: 'stream', name: c.name, text: c.text });
    } else if (type === 'error') {
      div.className += ' error';
      div.textContent = c.ename + ': ' + c.evalue;
      cell.data.push({ output_type: 'error', ename: c.ename, evalue: c.evalue, traceback: c.traceback });
    } else if (type === 'display_data' || type === 'execute_result') {
      cell.data.push({ output_type: type, data: c.data, metadata: c.metadata });
      const w = c.data[WIDGET_VIEW];
      if (w && w.version_major === 2) {
        const model = manager.get_model(w.model_id);
        if (model === undefined) {
          div.textContent = 'widget model ' + w.model_id + ' not found';
        } else {
          model.then(m => manager.create_view(m)).then(view => manager.display_view(msg, view, { el: div }))
            .catch(err => { div.textContent = 'widget view failed: ' + err; console.error(err); });
        }
      } else if (c.data['text/html'] !== undefined) {
        div.innerHTML = c.data['text/html'];
      } else if (c.data['text/plain'] !== undefined) {
        div.textContent = c.data['text/plain'];
      }
    } else if (type === 'clear_output') {
      cell.outputs.replaceChildren();
      cell.data = [];
      return;
    } else {
      return;
    }
    cell.outputs.append(div);
  };

  const setPrompt = cell => {
    cell.prompt.textContent = '[' + (cell.running ? '*' : cell.count === null ? ' ' : cell.count) + ']';
  };
  cells.forEach(setPrompt);

  const page = {
    container: root,
    outputSelector: '.outputs',
    commsOpened,
    cells: () => cells.map(c => ({ el: c.el, prompt: c.running ? '*' : c.count, outputs: c.data })),
    cellNode: i => cells[i].el,
    state: () => kernel.connectionStatus !== 'connected' ? 'no kernel'
      : kernel.name !== 'godist' ? 'kernel ' + kernel.name
        : page.recording ? 'ready' : 'no recorder',
    // execute runs cell i as VS Code's cell execution does: its outputs cleared, the
    // request's metadata naming the cell.
    execute: i => {
      const cell = cells[i];
      cell.outputs.replaceChildren();
      cell.data = [];
      cell.running = true;
      cell.count = null;
      setPrompt(cell);
      const source = cell.el.querySelector('.input').textContent;
      const future = kernel.requestExecute(
        { code: source, silent: false, store_history: true, allow_stdin: false, stop_on_error: false },
        false, { cellId: cell.cellId });
      future.onIOPub = msg => render(cell, msg);
      future.onReply = reply => {
        cell.count = reply.content.execution_count;
      };
      future.done.finally(() => {
        cell.running = false;
        setPrompt(cell);
        future.dispose();
      });
      return true;
    },
    probe: code => probe(kernel, code, { cellId: cells.length ? cells[0].cellId : 'vscode-notebook-cell:/home/student/probe.ipynb#W0sZmlsZQ%3D%3D' })
  };
  window.godistPage = page;
  installRecorder(page);
  page.recording = true;
}

window.addEventListener('load', () => {
  main().catch(err => {
    console.error('godist page:', err);
    window.godistPageError = String(err && err.stack || err);
  });
});
