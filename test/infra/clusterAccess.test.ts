import { suite } from "uvu";
import * as assert from "uvu/assert";
import {
  type BicepFile,
  type Declaration,
  callArguments,
  callName,
  declared,
  evaluate,
  infraFile,
  literal,
  loadInfra,
  property,
  resourcesOfType,
  valueOf,
} from "./bicepTree.js";

const roles = {
  storageBlobDataOwner: "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
  storageTableDataContributor: "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
  monitoringMetricsPublisher: "3913510d-42f4-4e42-8a64-420c390055eb",
  clusterUser: "4abbcc35-e782-43d8-92c5-2d3f1bd2253f",
};

const readCustomResources = "Microsoft.ContainerService/managedClusters/customresources/read";
const createLocalSubjectAccessReviews =
  "Microsoft.ContainerService/managedClusters/authorization.k8s.io/localsubjectaccessreviews/write";
const createSubjectAccessReviews =
  "Microsoft.ContainerService/managedClusters/authorization.k8s.io/subjectaccessreviews/write";

function bodyOf(resource: Declaration) {
  if (resource.body === undefined) throw new Error(`${resource.name} has no body`);
  return resource.body.object;
}

/** The built-in role a role assignment grants, when it names one through a literal GUID. */
function builtInRole(file: BicepFile, assignment: Declaration): string | undefined {
  const roleDefinitionId = property(bodyOf(assignment), "properties", "roleDefinitionId");
  if (roleDefinitionId === undefined || callName(roleDefinitionId) !== "subscriptionResourceId") return undefined;
  const [type, id] = callArguments(roleDefinitionId);
  assert.is(literal(type), "Microsoft.Authorization/roleDefinitions");
  try {
    const value = id === undefined ? undefined : evaluate(file, id);
    return typeof value === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

const access = suite("identity and role assignments");

access("every role assignment is named with guid() and assigns to the webhooks' identity", async () => {
  let count = 0;
  for (const file of (await loadInfra()).values()) {
    for (const assignment of resourcesOfType(file, "Microsoft.Authorization/roleAssignments")) {
      count += 1;
      const name = property(bodyOf(assignment), "name");
      assert.ok(name !== undefined && callName(name) === "guid", `${file.path} ${assignment.name}: name is not guid(...)`);
      assert.ok(callArguments(name).length >= 2, `${file.path} ${assignment.name}: guid() needs scope and principal`);
      assert.is(property(bodyOf(assignment), "properties", "principalId")?.text, "principalId");
      assert.is(literal(property(bodyOf(assignment), "properties", "principalType")), "ServicePrincipal");
      assert.ok(property(bodyOf(assignment), "scope") !== undefined, `${file.path} ${assignment.name}: no scope`);
    }
  }
  assert.ok(count >= 4, `only ${count} role assignments`);
});

access("on the storage account: exactly the host-storage set, Storage Blob Data Owner and Storage Table Data Contributor", async () => {
  const storage = await infraFile("infra/modules/storage.bicep");
  const assignments = resourcesOfType(storage, "Microsoft.Authorization/roleAssignments");
  assert.equal(assignments.map((assignment) => builtInRole(storage, assignment)).sort(), [roles.storageBlobDataOwner, roles.storageTableDataContributor].sort());
  for (const assignment of assignments) {
    assert.is(property(bodyOf(assignment), "scope")?.text, "account");
    assert.is(assignment.body?.condition, undefined);
    assert.is(assignment.body?.loop, undefined);
  }
});

access("Monitoring Metrics Publisher on Application Insights", async () => {
  const monitoring = await infraFile("infra/modules/monitoring.bicep");
  const [assignment] = resourcesOfType(monitoring, "Microsoft.Authorization/roleAssignments");
  assert.ok(assignment !== undefined);
  assert.is(builtInRole(monitoring, assignment), roles.monitoringMetricsPublisher);
  assert.is(property(bodyOf(assignment), "scope")?.text, "appInsights");
});

access("one user-assigned identity, from an Azure Verified Module, feeds every assignment", async () => {
  const main = await infraFile("infra/main.bicep");
  const identity = declared(main, "module", "identity");
  assert.match(identity.target ?? "", /^br\/public:avm\/res\/managed-identity\/user-assigned-identity:\d+\.\d+\.\d+$/);
  for (const module of ["monitoring", "storage", "clusterAccess"]) {
    const principal = property(declared(main, "module", module).body?.object, "params", "principalId");
    assert.is(principal?.text, "identity.outputs.principalId", module);
  }
});

const cluster = suite<{ file: BicepFile }>("access to the AKS cluster");

cluster.before(async (context) => {
  context.file = await infraFile("infra/modules/cluster-access.bicep");
});

cluster("main deploys cluster access only with a cluster ID, in the cluster's resource group", async () => {
  const main = await infraFile("infra/main.bicep");
  const module = declared(main, "module", "clusterAccess");
  assert.is(module.body?.condition?.text, "(hasCluster)");
  assert.is(property(module.body?.object, "scope")?.text, "resourceGroup(clusterSubscriptionId, clusterResourceGroupName)");
  const id = "/subscriptions/1111/resourceGroups/rg-aks/providers/Microsoft.ContainerService/managedClusters/aks-one";
  const bindings = { clusterResourceId: id };
  assert.is(valueOf(main, "hasCluster", { bindings }), true);
  assert.is(evaluate(main, property(module.body?.object, "params", "clusterName")!, { bindings }), "aks-one");
  const segments = valueOf(main, "clusterIdSegments", { bindings });
  assert.ok(Array.isArray(segments));
  assert.equal([segments[2], segments[4]], ["1111", "rg-aks"]);
  assert.is(valueOf(main, "clusterResourceId"), "");
  assert.is(valueOf(main, "clusterUsesAzureRbac"), false);
});

cluster("Azure Kubernetes Service Cluster User Role on the cluster, always", ({ file }) => {
  const assignments = resourcesOfType(file, "Microsoft.Authorization/roleAssignments");
  const clusterUser = assignments.find((assignment) => builtInRole(file, assignment) === roles.clusterUser);
  assert.ok(clusterUser !== undefined);
  assert.is(property(bodyOf(clusterUser), "scope")?.text, "cluster");
  assert.is(clusterUser.body?.condition, undefined);
  const [managedCluster] = resourcesOfType(file, "Microsoft.ContainerService/managedClusters");
  assert.ok(managedCluster?.existing, "the cluster is referenced, never deployed");
});

cluster("with Azure RBAC: a custom role with exactly the webhooks' data actions", ({ file }) => {
  const [role] = resourcesOfType(file, "Microsoft.Authorization/roleDefinitions");
  assert.ok(role !== undefined);
  assert.is(role.body?.condition?.text, "(clusterUsesAzureRbac)");
  assert.is(callName(property(bodyOf(role), "name")!), "guid");
  const permissions = property(bodyOf(role), "properties", "permissions");
  assert.ok(permissions !== undefined);
  const dataActionsFor = (includeSubjectAccessReviews: boolean) => {
    const [entry] = evaluate(file, permissions, { bindings: { includeSubjectAccessReviews } }) as readonly Record<string, unknown>[];
    assert.equal(entry?.["actions"], []);
    return entry?.["dataActions"];
  };
  assert.equal(dataActionsFor(false), [readCustomResources, createLocalSubjectAccessReviews]);
  assert.equal(dataActionsFor(true), [readCustomResources, createLocalSubjectAccessReviews, createSubjectAccessReviews]);
});

cluster("main asks for subjectaccessreviews only when the requesting user is checked", async () => {
  const main = await infraFile("infra/main.bicep");
  const params = property(declared(main, "module", "clusterAccess").body?.object, "params");
  assert.is(property(params, "includeSubjectAccessReviews")?.text, "authorizeRequestingUser");
});

cluster("the custom role is assigned on the cluster, narrowed to gmsacredentialspecs by an ABAC condition", ({ file }) => {
  const assignments = resourcesOfType(file, "Microsoft.Authorization/roleAssignments");
  const custom = assignments.find((assignment) => builtInRole(file, assignment) === undefined);
  assert.ok(custom !== undefined);
  assert.is(custom.body?.condition?.text, "(clusterUsesAzureRbac)");
  assert.is(property(bodyOf(custom), "scope")?.text, "cluster");
  assert.match(property(bodyOf(custom), "properties", "roleDefinitionId")?.text ?? "", /webhookRole\.name/);
  const condition = property(bodyOf(custom), "properties", "condition")!;
  const version = property(bodyOf(custom), "properties", "conditionVersion")!;
  assert.is(evaluate(file, condition, { bindings: { restrictCustomResourceReads: false } }), null);
  const text = evaluate(file, condition, { bindings: { restrictCustomResourceReads: true } });
  assert.type(text, "string");
  assert.ok(String(text).includes(`ActionMatches{'${readCustomResources}'}`));
  assert.ok(String(text).includes("customResources:group] StringEqualsIgnoreCase 'windows.k8s.io'"));
  assert.ok(String(text).includes("customResources:kind] StringEqualsIgnoreCase 'gmsacredentialspecs'"));
  assert.is(evaluate(file, version, { bindings: { restrictCustomResourceReads: true } }), "2.0");
  assert.is(valueOf(file, "restrictCustomResourceReads"), true);
});

access.run();
cluster.run();
