// Bundles one front end of the browser test with esbuild: run as `node ../build.mjs OUTDIR`
// in its directory (jlab or html7), after npm ci there. It writes OUTDIR/index.html,
// bundle.js and bundle.css.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.cwd(), 'package.json'));
const esbuild = require('esbuild');
const outdir = process.argv[2];
if (!outdir) {
  console.error('usage: node ../build.mjs OUTDIR');
  process.exit(2);
}

// JupyterLab's icons are SVG text when JavaScript imports them (its webpack config's
// raw loader) and data URLs where CSS points at them.
const svg = {
  name: 'svg',
  setup(build) {
    build.onResolve({ filter: /\.svg$/ }, args => {
      if (args.kind !== 'url-token' || !args.path.startsWith('.') && !path.isAbsolute(args.path)) return undefined;
      return { path: path.resolve(args.resolveDir, args.path), namespace: 'svg-url' };
    });
    build.onLoad({ filter: /.*/, namespace: 'svg-url' }, args => ({
      contents: fs.readFileSync(args.path), loader: 'dataurl'
    }));
  }
};

// jupyterlab_widgets' controls plugin loads the controls module with webpack's
// require.ensure (a lazily loaded chunk); esbuild's equivalent is a dynamic import.
const requireEnsure = {
  name: 'require-ensure',
  setup(build) {
    build.onLoad({ filter: /@jupyter-widgets[\\/]jupyterlab-manager[\\/]lib[\\/]plugin\.js$/ }, args => {
      const src = fs.readFileSync(args.path, 'utf8');
      const re = /require\.ensure\(\['@jupyter-widgets\/controls'\],[\s\S]*?'@jupyter-widgets\/controls'\);/;
      if (!re.test(src)) {
        throw new Error(args.path + ": no require.ensure(['@jupyter-widgets/controls'], ...) to translate");
      }
      return {
        contents: src.replace(re, "import('@jupyter-widgets/controls').then(resolve, reject);"),
        loader: 'js'
      };
    });
  }
};

fs.mkdirSync(outdir, { recursive: true });
await esbuild.build({
  entryPoints: { bundle: 'index.js' },
  bundle: true,
  outdir,
  format: 'iife',
  platform: 'browser',
  target: 'es2020',
  minify: false,
  sourcemap: false,
  logLevel: 'warning',
  define: { 'process.env.NODE_ENV': '"production"', global: 'window' },
  loader: {
    '.svg': 'text', '.woff': 'dataurl', '.woff2': 'dataurl', '.ttf': 'dataurl', '.eot': 'dataurl',
    '.png': 'dataurl', '.gif': 'dataurl', '.html': 'text'
  },
  plugins: [svg, requireEnsure]
});
fs.copyFileSync('index.html', path.join(outdir, 'index.html'));
