// Builds the dashboard into dist/: the app bundled by esbuild into content-hashed files under
// assets/ (cached for a year by the server), and index.html naming them.
import { build } from 'esbuild';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'dist');
await rm(out, { recursive: true, force: true });
await mkdir(join(out, 'assets'), { recursive: true });
const result = await build({
  entryPoints: [join(here, 'src/main.js')],
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  sourcemap: 'linked',
  entryNames: 'app-[hash]',
  outdir: join(out, 'assets'),
  metafile: true,
  legalComments: 'linked',
  logLevel: 'warning',
});
const files = Object.keys(result.metafile.outputs).map((f) => basename(f));
const js = files.find((f) => f.endsWith('.js'));
const css = files.find((f) => f.endsWith('.css'));
if (!js || !css) throw new Error(`build: expected a .js and a .css output, got ${files.join(', ')}`);
const html = (await readFile(join(here, 'src/index.html'), 'utf8')).replace('{{js}}', js).replace('{{css}}', css);
await writeFile(join(out, 'index.html'), html);
console.log(`web: dist/assets/${js}, dist/assets/${css}`);
