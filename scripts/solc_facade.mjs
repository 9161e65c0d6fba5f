#!/usr/bin/env node
// A facade that makes the npm `solc` package (the official compiler as WebAssembly) look
// like a native `solc` binary to py-solc-x and brownie, so the project compiles offline.
//
// It answers `--version` in the native form and compiles `--standard-json` input from
// stdin with an import callback that reads files from the base/include/allowed paths and
// the working directory. Every other flag py-solc-x passes (`--allow-paths`) is accepted
// and used only to find imports. Nothing is printed but the JSON output.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const solc = require("solc");

const args = process.argv.slice(2);
const version = solc.version(); // e.g. 0.8.28+commit.7893614a.Emscripten.clang

if (args.includes("--version")) {
  const native = version.replace(/\.Emscripten\.clang$/, ".Linux.g++");
  process.stdout.write(
    `solc, the solidity compiler commandline interface\nVersion: ${native}\n`,
  );
  process.exit(0);
}

if (!args.includes("--standard-json")) {
  process.stderr.write("solc facade: only --version and --standard-json are supported\n");
  process.exit(1);
}

// Folders to look in for imports, in order: the ones py-solc-x names, then the cwd.
const roots = [];
for (let i = 0; i < args.length; i++) {
  if (["--allow-paths", "--base-path", "--include-path"].includes(args[i]) && args[i + 1]) {
    for (const p of args[i + 1].split(",")) if (p) roots.push(path.resolve(p));
    i++;
  }
}
roots.push(process.cwd());

function findImports(importPath) {
  const candidates = path.isAbsolute(importPath)
    ? [importPath]
    : roots.map((root) => path.join(root, importPath));
  for (const file of candidates) {
    if (fs.existsSync(file) && fs.statSync(file).isFile()) {
      return { contents: fs.readFileSync(file, "utf8") };
    }
  }
  return { error: `File not found: ${importPath}` };
}

const input = fs.readFileSync(0, "utf8");
const output = solc.compile(input, { import: findImports });
process.stdout.write(output);
