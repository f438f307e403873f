// Preloaded (NODE_OPTIONS=--require) by the package tests: the process reports the Node.js release
// in OLDER_NODE_VERSION, as a Functions instance on an older runtime would.
"use strict";
Object.defineProperty(process, "version", { value: process.env.OLDER_NODE_VERSION });
