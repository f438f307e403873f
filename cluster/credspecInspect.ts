import { isLeft } from "fp-ts/Either";
import type * as t from "io-ts";
import { parseArgs } from "node:util";
import { describeDecodeErrors } from "../lib/decodeErrors.js";
import { explainPod } from "../lib/credspec/explainPod.js";
import { RbacBinding, RbacList, RbacRole, whoMayUse, type UseGrantFound } from "../lib/credspec/rbacUse.js";
import { credSpecNameProblem } from "../lib/gmsa/credSpecName.js";
import { serviceAccountPrincipal } from "../lib/gmsa/ports.js";
import { apiServerConnection, type ApiServerConnection } from "../lib/kube/apiServerConnection.js";
import { credSpecApi, credSpecPath } from "../lib/kube/credSpecApi.js";
import { useAuthorization } from "../lib/kube/useAuthorization.js";
import { readPolicySettings } from "../lib/settings/admission.js";
import { readDocuments, UsageError, type CredspecIo } from "./credspecInput.js";
import { withKubeObjects } from "./kubeObjects.js";
import { exitCodes } from "./wire.js";
import { isJsonObject as isRecord } from "../lib/jsonObject.js";

/** The commands that read the cluster: who may use a spec, and what the webhooks would do to a pod. */
const reviewTimeoutMs = 10_000;

export async function whoCanUse(args: readonly string[], io: CredspecIo): Promise<number> {
  const { values, positionals } = parseArgs({ args: [...args], strict: true, allowPositionals: true, options: { namespace: { type: "string" } } });
  if (positionals.length !== 1) throw new UsageError("who-can-use takes one credential spec name");
  const credSpec = positionals[0]!;
  const nameProblem = credSpecNameProblem(credSpec);
  if (nameProblem) throw new UsageError(`"${credSpec}" is not a valid GMSACredentialSpec name: ${nameProblem}`);
  const config = io.kubeConfig();
  const rbac = "rbac.authorization.k8s.io/v1";
  const [exists, clusterRoles, roles, clusterRoleBindings, roleBindings] = await withKubeObjects(config, (client) =>
    Promise.all([
      client.read({ apiVersion: "windows.k8s.io/v1", kind: "GMSACredentialSpec", metadata: { name: credSpec } }).then(
        (stored) => stored !== undefined,
        () => undefined,
      ),
      client.list(rbac, "ClusterRole").then((items) => decoded(RbacList(RbacRole), { items }, "ClusterRoles")),
      client.list(rbac, "Role").then((items) => decoded(RbacList(RbacRole), { items }, "Roles")),
      client.list(rbac, "ClusterRoleBinding").then((items) => decoded(RbacList(RbacBinding), { items }, "ClusterRoleBindings")),
      client.list(rbac, "RoleBinding").then((items) => decoded(RbacList(RbacBinding), { items }, "RoleBindings")),
    ]),
  );
  const rbacObjects = { clusterRoles: clusterRoles.items, roles: roles.items, clusterRoleBindings: clusterRoleBindings.items, roleBindings: roleBindings.items };
  const found = whoMayUse(rbacObjects, credSpec, values.namespace);
  // What grants use of every spec (a wildcard, no resourceNames) is found for a name no rule can list.
  const toAll = new Set(whoMayUse(rbacObjects, "\u0000", values.namespace).map((grant) => `${grant.via} ${subjectName(grant)}`));
  const naming = found.filter((grant) => !toAll.has(`${grant.via} ${subjectName(grant)}`));
  const rows = [["KIND", "SUBJECT", "NAMESPACE", "ACCESS REVIEW", "VIA"]];
  await withConnection(config, async (connection) => {
    const authorizer = useAuthorization(connection, { timeoutMs: reviewTimeoutMs });
    const seen = new Set<string>();
    for (const grant of found) {
      const row = [grant.subject.kind, subjectName(grant), grant.namespace ?? "*", await confirm(grant, credSpec, authorizer, values.namespace), grant.via];
      const key = row.slice(0, 3).join(" ");
      if (seen.has(key)) continue;
      seen.add(key);
      rows.push(row);
    }
  });
  // A name that does not exist is said so first: grants that name it are a typo, or outlived a rename.
  if (exists === false) {
    const named = naming.map((grant) => grant.via.split(" -> ")[0]).filter((via, i, all) => all.indexOf(via) === i);
    io.stdout(
      `GMSACredentialSpec "${credSpec}" does not exist${
        named.length > 0 ? `; granted by name through ${named.join(", ")} (a typo, or a spec renamed or deleted)` : "; no grant names it"
      }\n`,
    );
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  for (const row of rows) io.stdout(`${row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!))).join("  ")}\n`);
  return exitCodes.ok;
}

/**
 * Every credential spec's name, for the similar-names hint the live webhook gives (it knows them
 * from its cache); undefined when they cannot be listed, and the hint is then left out.
 */
async function credSpecNames(connection: ApiServerConnection): Promise<readonly string[] | undefined> {
  const names: string[] = [];
  let next: string | undefined;
  for (let page = 0; page < 100; page++) {
    const query = new URLSearchParams({ limit: "500", ...(next ? { continue: next } : {}) });
    const reply = await connection.send({ method: "GET", path: `${credSpecPath}?${query}` }).catch(() => undefined);
    if (reply?.status !== 200 || !isRecord(reply.body) || !Array.isArray(reply.body.items)) return undefined;
    for (const item of reply.body.items) if (isRecord(item) && isRecord(item.metadata) && typeof item.metadata.name === "string") names.push(item.metadata.name);
    next = isRecord(reply.body.metadata) && typeof reply.body.metadata.continue === "string" && reply.body.metadata.continue !== "" ? reply.body.metadata.continue : undefined;
    if (!next) return names;
  }
  return undefined;
}

function knownNamesOf(names: readonly string[] | undefined): () => readonly string[] | undefined {
  return () => names;
}

async function withConnection<T>(config: ReturnType<CredspecIo["kubeConfig"]>, work: (connection: ApiServerConnection) => Promise<T>): Promise<T> {
  const connection = apiServerConnection(config, { timeoutMs: reviewTimeoutMs });
  try {
    return await work(connection);
  } finally {
    await connection.close();
  }
}

function subjectName(grant: UseGrantFound): string {
  return grant.subject.kind === "ServiceAccount" ? `${grant.subject.namespace ?? ""}/${grant.subject.name}` : grant.subject.name;
}

/** A service account is asked about where its pods run: its own namespace (or the one given). */
async function confirm(grant: UseGrantFound, credSpec: string, authorizer: ReturnType<typeof useAuthorization>, namespace: string | undefined): Promise<string> {
  if (grant.subject.kind !== "ServiceAccount" || !grant.subject.namespace) return "-";
  const where = namespace ?? grant.namespace ?? grant.subject.namespace;
  const decision = await authorizer.mayUse(serviceAccountPrincipal(grant.subject.namespace, grant.subject.name), where, credSpec, {
    signal: AbortSignal.timeout(reviewTimeoutMs),
    namespace: where,
  });
  return decision.allowed ? "allowed" : "denied";
}

function decoded<A>(codec: t.Decoder<unknown, A>, value: unknown, what: string): A {
  const result = codec.decode(value);
  if (isLeft(result)) throw new Error(`the API server's list of ${what} is not as expected: ${describeDecodeErrors(result.left)}`);
  return result.right;
}

export async function explain(args: readonly string[], io: CredspecIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    strict: true,
    allowPositionals: true,
    options: { namespace: { type: "string" }, as: { type: "string" }, "as-group": { type: "string", multiple: true } },
  });
  if (positionals.length !== 1) throw new UsageError("explain takes one manifest: a Pod or a workload");
  const documents = readDocuments(io.readFile(positionals[0]!));
  if (documents.length !== 1) throw new UsageError(`${positionals[0]} must hold exactly one Pod or workload`);
  // explain is an operator's tool: after a 403 it names the similar specs the pod may use.
  const settings = { ...readPolicySettings(), suggestAfterRefusal: true };
  const config = io.kubeConfig();
  const bounds = { timeoutMs: reviewTimeoutMs };
  const explanation = await withConnection(config, async (connection) =>
    explainPod(
      documents[0],
      {
        credSpecs: { ...credSpecApi(connection, bounds), knownNames: knownNamesOf(await credSpecNames(connection)) },
        authorizer: useAuthorization(connection, bounds),
        settings,
        call: { signal: AbortSignal.timeout(3 * reviewTimeoutMs) },
      },
      {
        ...(values.namespace === undefined ? {} : { namespace: values.namespace }),
        ...(values.as === undefined ? {} : { user: { username: values.as, groups: ["system:authenticated", ...(values["as-group"] ?? [])] } }),
      },
    ),
  );
  for (const line of explanation.lines) io.stdout(`${line}\n`);
  return explanation.admitted ? exitCodes.ok : exitCodes.failed;
}
