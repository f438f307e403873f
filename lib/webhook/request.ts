import * as t from "io-ts";

/**
 * The admission request every webhook's policy reads: the AdmissionReview's `request`, its objects
 * not yet decoded (each policy decodes the objects it judges). The envelope (lib/admission) decodes
 * it from the body; the policies see only this.
 */

const GroupVersionKind = t.type({ group: t.string, version: t.string, kind: t.string });
const GroupVersionResource = t.type({ group: t.string, version: t.string, resource: t.string });

export const UserInfo = t.partial({
  username: t.string,
  uid: t.string,
  groups: t.array(t.string),
  extra: t.record(t.string, t.array(t.string)),
});

export const AdmissionRequest = t.intersection([
  t.type({
    uid: t.string,
    kind: GroupVersionKind,
    operation: t.string,
  }),
  t.partial({
    resource: GroupVersionResource,
    subResource: t.string,
    name: t.string,
    namespace: t.string,
    userInfo: UserInfo,
    object: t.unknown,
    oldObject: t.unknown,
    dryRun: t.boolean,
  }),
]);
export type AdmissionRequest = t.TypeOf<typeof AdmissionRequest>;
