// Injected into the deployment bundle by scripts/package.ts: every free reference to Request,
// Response, Headers or FormData in the bundled modules (the Functions library builds each
// invocation's request and answer from them) is bound to undici's classes, which the bundle
// already holds for @kubernetes/client-node's fetch, instead of Node's globals. Node makes its
// globals from a copy of undici of its own that it loads on first use: about 12 ms of a cold
// start, for classes the bundle has already loaded and compiled. All four come from the one copy,
// so that they recognise one another (a Response takes a FormData body only from its own copy).
import { FormData, Headers, Request, Response } from "undici";

export { FormData, Headers, Request, Response };
