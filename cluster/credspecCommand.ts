import { parseArgs } from "node:util";
import { checkCredSpec, type CredSpecReport } from "../lib/credspec/checkCredSpec.js";
import { describeFinding, type Finding } from "../lib/credspec/credSpecFindings.js";
import { credSpecDocument, generateCredSpec, type CredSpecDocument, type PluginChoice } from "../lib/credspec/generateCredSpec.js";
import { grantUse } from "../lib/credspec/grantUse.js";
import { credSpecNameProblem } from "../lib/gmsa/credSpecName.js";
import { applyObjects } from "./applyObjects.js";
import { isRecord, parseJsonFile, readDocuments, UsageError, type CredspecIo } from "./credspecInput.js";
import { audit } from "./credspecAudit.js";
import { explain, whoCanUse } from "./credspecInspect.js";
import { revoke } from "./credspecRevoke.js";
import type { KubernetesObject } from "./manifests.js";
import { exitCodes, toYaml } from "./wire.js";

export type { CredspecIo } from "./credspecInput.js";

/** `npm run credspec -- <command>`: credential specs from Active Directory facts to a running pod. */
export const credspecUsage = `usage: npm run credspec -- <command>
  generate --dns-name DNS --netbios-name NETBIOS --sid DOMAIN_SID --guid DOMAIN_GUID --account GMSA
           [--name NAME] [--extra-account GMSA]... [--dns-tree-name FOREST_DNS]
           [--plugin akv --secret-uri URI --object-id ID | --plugin-guid {GUID} --plugin-input TEXT] [--apply]
  generate --from-json FILE [--name NAME] [--apply]     (the JSON New-CredentialSpec writes)
  lint FILE...                                          (YAML or JSON; exit 1 on errors)
  grant NAME --service-account NAMESPACE/NAME [--cluster-wide] [--apply]
  revoke NAME --service-account NAMESPACE/NAME [--cluster-wide] [--apply]
                                                        (removes what grant made, unless changed by hand or bound
                                                        elsewhere; running pods keep the contents they were given)
  who-can-use NAME [--namespace NAMESPACE]              (from RBAC, each service account confirmed by an access review)
  explain MANIFEST.yaml [--namespace NAMESPACE] [--as USER [--as-group GROUP]...]
                                                        (what the pod webhooks would decide for a Pod, or for the pods of a
                                                        Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob,
                                                        creating nothing; exit 1 if refused)
  audit [--output table|json]                           (the cluster's credential spec health: invalid or unusable specs,
                                                        grants to missing names, running pods that drifted or lost use,
                                                        shared NetBIOS names; exit 1 on an error)
`;

export async function runCredspec(args: readonly string[], io: CredspecIo): Promise<number> {
  const [command, ...rest] = args;
  // Asking for help is no mistake: the usage on stdout, exit 0 (`--help`, `help`, `<command> --help`).
  if (command === "--help" || command === "-h" || command === "help" || rest.includes("--help") || rest.includes("-h")) {
    io.stdout(credspecUsage);
    return exitCodes.ok;
  }
  try {
    switch (command) {
      case "generate":
        return await generate(rest, io);
      case "lint":
        return lint(rest, io);
      case "grant":
        return await grant(rest, io);
      case "revoke":
        return await revoke(rest, io);
      case "who-can-use":
        return await whoCanUse(rest, io);
      case "explain":
        return await explain(rest, io);
      case "audit":
        return await audit(rest, io);
      default:
        throw new UsageError(command ? `unknown command "${command}"` : "no command given");
    }
  } catch (error) {
    if (error instanceof UsageError || (error instanceof TypeError && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS"))) {
      io.stderr(`${error.message}\n${credspecUsage}`);
      return exitCodes.usage;
    }
    io.stderr(`credspec ${command}: ${error instanceof Error ? error.message : String(error)}\n`);
    return exitCodes.failed;
  }
}

async function generate(args: readonly string[], io: CredspecIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    strict: true,
    options: {
      name: { type: "string" },
      "dns-name": { type: "string" },
      "netbios-name": { type: "string" },
      sid: { type: "string" },
      guid: { type: "string" },
      account: { type: "string" },
      "extra-account": { type: "string", multiple: true },
      "dns-tree-name": { type: "string" },
      plugin: { type: "string" },
      "secret-uri": { type: "string" },
      "object-id": { type: "string" },
      "plugin-guid": { type: "string" },
      "plugin-input": { type: "string" },
      "from-json": { type: "string" },
      apply: { type: "boolean", default: false },
    },
  });
  let document: CredSpecDocument;
  if (values["from-json"] !== undefined) {
    const credspec = parseJsonFile(io.readFile(values["from-json"]), values["from-json"]);
    document = credSpecDocument(values.name ?? nameFromAccount(credspec), credspec);
  } else {
    const required = (flag: "dns-name" | "netbios-name" | "sid" | "guid" | "account") => {
      const value = values[flag];
      if (value === undefined) throw new UsageError(`generate needs --${flag} (or --from-json FILE)`);
      return value;
    };
    const account = required("account");
    document = generateCredSpec({
      name: values.name ?? account.toLowerCase(),
      dnsName: required("dns-name"),
      netBiosName: required("netbios-name"),
      domainSid: required("sid"),
      domainGuid: required("guid"),
      account,
      extraAccounts: values["extra-account"] ?? [],
      ...(values["dns-tree-name"] === undefined ? {} : { dnsTreeName: values["dns-tree-name"] }),
      ...pluginOf(values),
    });
  }
  const nameProblem = credSpecNameProblem(document.metadata.name);
  if (nameProblem) throw new UsageError(`the object name "${document.metadata.name}" is not valid: ${nameProblem} (choose one with --name)`);
  const report = checkCredSpec(document.credspec);
  printFindings(report, io, flagHint);
  if (report.errors.length > 0) return exitCodes.failed;
  return emit([document], values.apply === true, io);
}

/** The flag that set a field, so a refusal of generated output points at what to change. */
const fieldFlags: Record<string, string> = {
  "credspec.DomainJoinConfig.Sid": "--sid",
  "credspec.DomainJoinConfig.Guid": "--guid",
  "credspec.DomainJoinConfig.DnsName": "--dns-name",
  "credspec.DomainJoinConfig.DnsTreeName": "--dns-tree-name",
  "credspec.DomainJoinConfig.NetBiosName": "--netbios-name",
  "credspec.DomainJoinConfig.MachineAccountName": "--account",
  "credspec.ActiveDirectoryConfig.HostAccountConfig.PluginGUID": "--plugin-guid",
  "credspec.ActiveDirectoryConfig.HostAccountConfig.PluginInput": "--plugin-input",
};

function flagHint(finding: Finding): string {
  const flag = fieldFlags[finding.path];
  return flag ? `${describeFinding(finding)} (${flag})` : describeFinding(finding);
}

function pluginOf(values: Record<string, string | boolean | string[] | undefined>): { plugin?: PluginChoice } {
  const text = (flag: string) => {
    const value = values[flag];
    return typeof value === "string" ? value : undefined;
  };
  const plugin = text("plugin");
  const guid = text("plugin-guid");
  const input = text("plugin-input");
  if (plugin !== undefined && (guid !== undefined || input !== undefined)) throw new UsageError("--plugin and --plugin-guid/--plugin-input exclude each other");
  if (plugin !== undefined) {
    if (plugin !== "akv") throw new UsageError(`unknown --plugin "${plugin}" (known: akv; any other with --plugin-guid and --plugin-input)`);
    const secretUri = text("secret-uri");
    const objectId = text("object-id");
    if (secretUri === undefined || objectId === undefined) throw new UsageError("--plugin akv needs --secret-uri and --object-id");
    return { plugin: { kind: "akv", secretUri, objectId } };
  }
  if (guid === undefined && input === undefined) return {};
  if (guid === undefined || input === undefined) throw new UsageError("--plugin-guid and --plugin-input go together");
  return { plugin: { kind: "raw", guid, input } };
}

function nameFromAccount(credspec: unknown): string {
  const account = isRecord(credspec) && isRecord(credspec.DomainJoinConfig) ? credspec.DomainJoinConfig.MachineAccountName : undefined;
  if (typeof account !== "string") throw new UsageError("the JSON names no DomainJoinConfig.MachineAccountName to name the object after; give --name");
  return account.toLowerCase();
}

function lint(files: readonly string[], io: CredspecIo): number {
  if (files.length === 0) throw new UsageError("lint needs at least one file");
  let failed = false;
  for (const file of files) {
    let documents: unknown[];
    try {
      documents = readDocuments(io.readFile(file));
    } catch (error) {
      io.stderr(`${file}: ${error instanceof Error ? error.message : String(error)}\n`);
      failed = true;
      continue;
    }
    let checked = 0;
    for (const document of documents) {
      const target = lintTarget(document);
      if (!target) continue;
      checked += 1;
      const report = checkCredSpec(target.credspec, target.root);
      printFindings(report, io, (finding) => `${file}: ${target.label}${describeFinding(finding)}`);
      if (report.errors.length > 0) failed = true;
      else io.stdout(`${file}: ${target.label}ok${report.warnings.length > 0 ? ` (${report.warnings.length} warning${report.warnings.length === 1 ? "" : "s"})` : ""}\n`);
    }
    if (checked === 0) {
      io.stderr(`${file}: no GMSACredentialSpec or credential spec JSON in it\n`);
      failed = true;
    }
  }
  return failed ? exitCodes.failed : exitCodes.ok;
}

/** A GMSACredentialSpec object, or the bare JSON New-CredentialSpec writes. */
function lintTarget(document: unknown): { credspec: unknown; root: string; label: string } | undefined {
  if (!isRecord(document)) return undefined;
  if (document.kind === "GMSACredentialSpec") {
    const name = isRecord(document.metadata) && typeof document.metadata.name === "string" ? document.metadata.name : "(no name)";
    return { credspec: document.credspec, root: "credspec", label: `GMSACredentialSpec "${name}": ` };
  }
  if (document.kind === undefined && ("CmsPlugins" in document || "DomainJoinConfig" in document || "ActiveDirectoryConfig" in document)) {
    return { credspec: document, root: "", label: "" };
  }
  return undefined;
}

function printFindings(report: CredSpecReport, io: CredspecIo, describe: (finding: Finding) => string): void {
  for (const error of report.errors) io.stderr(`error: ${describe(error)}\n`);
  for (const warning of report.warnings) io.stderr(`warning: ${describe(warning)}\n`);
}

async function grant(args: readonly string[], io: CredspecIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    strict: true,
    allowPositionals: true,
    options: { "service-account": { type: "string" }, "cluster-wide": { type: "boolean", default: false }, apply: { type: "boolean", default: false } },
  });
  if (positionals.length !== 1) throw new UsageError("grant takes one credential spec name");
  const credSpec = positionals[0]!;
  const nameProblem = credSpecNameProblem(credSpec);
  if (nameProblem) throw new UsageError(`"${credSpec}" is not a valid GMSACredentialSpec name: ${nameProblem}`);
  const account = values["service-account"];
  const match = account === undefined ? null : /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(account);
  if (!match || account!.length > 253 + 64) throw new UsageError("grant needs --service-account NAMESPACE/NAME (both lower-case DNS names)");
  const objects = grantUse({ credSpec, namespace: match[1]!, serviceAccount: match[3]!, clusterWide: values["cluster-wide"] === true });
  return emit(objects, values.apply === true, io);
}

async function emit(objects: readonly KubernetesObject[], apply: boolean, io: CredspecIo): Promise<number> {
  if (!apply) {
    io.stdout(toYaml(objects));
    return exitCodes.ok;
  }
  await applyObjects(io.kubeConfig(), objects);
  for (const object of objects) io.stdout(`applied ${object.kind} ${object.metadata.namespace ? `${object.metadata.namespace}/` : ""}${object.metadata.name}\n`);
  return exitCodes.ok;
}
