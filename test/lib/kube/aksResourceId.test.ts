import { suite } from "uvu";
import * as assert from "uvu/assert";
import { AksResourceIdError, parseAksResourceId } from "../../../lib/kube/aksResourceId.js";

const ResourceId = suite("AKS resource ID");

const subscription = "0b1f6471-1bf0-4dda-aec3-cb9272f09590";
const valid = `/subscriptions/${subscription}/resourceGroups/rg-aks.prod(1)/providers/Microsoft.ContainerService/managedClusters/aks-one`;

ResourceId("a managed cluster's ID is split into its parts", () => {
  assert.equal(parseAksResourceId(valid), {
    subscriptionId: subscription,
    resourceGroup: "rg-aks.prod(1)",
    clusterName: "aks-one",
    id: valid,
  });
});

ResourceId("the fixed segments are matched without regard to case, and spelled as usual in the result", () => {
  const lower = `/SUBSCRIPTIONS/${subscription}/resourcegroups/rg/providers/microsoft.containerservice/MANAGEDCLUSTERS/c1`;
  assert.is(parseAksResourceId(lower).id, `/subscriptions/${subscription}/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c1`);
});

ResourceId("surrounding spaces and a trailing slash are forgiven", () => {
  assert.is(parseAksResourceId(`  ${valid}/ \n`).id, valid);
});

const refused: Array<[string, string, string]> = [
  ["an empty value", "", "must start with /subscriptions/"],
  ["a cluster name alone", "aks-one", "must start with /subscriptions/"],
  ["a resource group's ID", `/subscriptions/${subscription}/resourceGroups/rg`, "has 4 path segments, not 8"],
  ["a subscription that is not a GUID", `/subscriptions/1111/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c`, 'the subscription ID "1111" is not a GUID'],
  [
    "another provider",
    `/subscriptions/${subscription}/resourceGroups/rg/providers/Microsoft.Compute/managedClusters/c`,
    '"Microsoft.Compute" where "Microsoft.ContainerService" belongs',
  ],
  ["a fleet, not a managed cluster", `/subscriptions/${subscription}/resourceGroups/rg/providers/Microsoft.ContainerService/fleets/c`, '"fleets" where "managedClusters" belongs'],
  ["a child resource", `${valid}/agentPools/np1`, "has 10 path segments, not 8"],
  [
    "a cluster name ending in a hyphen",
    `/subscriptions/${subscription}/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/c-`,
    '"c-" is not a valid managed cluster name',
  ],
  [
    "a cluster name of 64 characters",
    `/subscriptions/${subscription}/resourceGroups/rg/providers/Microsoft.ContainerService/managedClusters/${"a".repeat(64)}`,
    "is not a valid managed cluster name",
  ],
  [
    "a resource group ending in a period",
    `/subscriptions/${subscription}/resourceGroups/rg./providers/Microsoft.ContainerService/managedClusters/c`,
    '"rg." is not a valid resource group name',
  ],
  [
    "a resource group with a space",
    `/subscriptions/${subscription}/resourceGroups/r g/providers/Microsoft.ContainerService/managedClusters/c`,
    '"r g" is not a valid resource group name',
  ],
];

for (const [what, value, problem] of refused) {
  ResourceId(`refuses ${what}, saying why and what was expected`, () => {
    try {
      parseAksResourceId(value);
      assert.unreachable("should have been refused");
    } catch (error) {
      assert.instance(error, AksResourceIdError);
      const message = (error as Error).message;
      assert.match(message, problem);
      assert.match(message, "expected /subscriptions/<subscription GUID>/resourceGroups/<group>/providers/Microsoft.ContainerService/managedClusters/<cluster>");
    }
  });
}

ResourceId.run();
