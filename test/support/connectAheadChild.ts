import { readFileSync } from "node:fs";
import { apiServerConnection, connectAhead, type ApiServerCredentials } from "../../lib/kube/apiServerConnection.js";

/**
 * A process of its own for test/lib/kube/connectAhead.test.ts, which watches when it exits:
 * `node --import tsx connectAheadChild.ts <ahead-only|ahead-then-call> <server URL> <CA file>`.
 * ahead-only opens a connection ahead and does nothing else; ahead-then-call lets the handshake
 * finish, then makes one call over the pool that takes it and prints the answer's status.
 */
const [mode, server, caFile] = process.argv.slice(2);
if (!mode || !server || !caFile) throw new Error("usage: connectAheadChild.ts <ahead-only|ahead-then-call> <server URL> <CA file>");
const ca = readFileSync(caFile, "utf8");
connectAhead(server, { ca });
if (mode === "ahead-then-call") {
  const credentials = {
    getCurrentCluster: () => ({ name: "child", server, skipTLSVerify: false }),
    getCurrentUser: () => ({ name: "child-user" }),
    applyToHTTPSOptions: async (options: { headers?: Record<string, unknown>; ca?: unknown }) => {
      options.headers = { ...options.headers, authorization: "Bearer t0ken" };
      options.ca = ca;
    },
  } as unknown as ApiServerCredentials;
  // Long enough for the handshake; a timer that keeps the process alive only until then.
  setTimeout(() => {
    const connection = apiServerConnection(credentials);
    void connection.send({ method: "GET", path: "/apis", timeoutMs: 10_000 }).then(
      (reply) => process.stdout.write(`status ${reply.status}\n`),
      (error: unknown) => process.stdout.write(`failed ${String(error)}\n`),
    );
  }, 300);
}
