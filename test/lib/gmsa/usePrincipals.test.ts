import { suite } from "uvu";
import * as assert from "uvu/assert";
import { usePrincipals, type UsePrincipal } from "../../../lib/gmsa/usePrincipals.js";
import { isSharedPrincipal } from "../../../lib/gmsa/ports.js";
import { admission, fakePorts } from "../../support/fakePorts.js";
import { pod } from "../../support/reviews.js";

const Principals = suite("usePrincipals");

function accountOf(namespace: string, serviceAccountName: string, settings = {}): UsePrincipal {
  const found = usePrincipals(admission("CREATE", pod({ namespace, serviceAccountName }), { namespace }), fakePorts({ settings }));
  if ("problem" in found) throw new Error(found.problem);
  return found.principals[0]!;
}

Principals("a requesting user whose extra attributes hold a __proto__ key cannot be asked about: the access review would drop it", () => {
  const userInfo = JSON.parse('{"username":"alice","groups":["developers"],"extra":{"__proto__":["scope-x"],"team":["a"]}}');
  const found = usePrincipals(admission("CREATE", pod(), { userInfo }), fakePorts({ settings: { authorizeRequestingUser: true } }));
  assert.ok("problem" in found && /extra attribute "__proto__"/.test(found.problem));
  const ordinary = usePrincipals(
    admission("CREATE", pod(), { userInfo: { username: "alice", extra: { team: ["a"] } } }),
    fakePorts({ settings: { authorizeRequestingUser: true } }),
  );
  assert.ok("principals" in ordinary && ordinary.principals.length === 2);
});

Principals("a pod's service account must hold use, in the pod's namespace", () => {
  const { principal, description, grantee } = accountOf("apps", "web");
  assert.is(principal.user, "system:serviceaccount:apps:web");
  assert.equal([...principal.groups], ["system:serviceaccounts", "system:serviceaccounts:apps", "system:authenticated"]);
  assert.equal(principal.serviceAccount, { namespace: "apps", name: "web" });
  assert.is(description, 'service account "web" in namespace "apps"');
  assert.equal(grantee, { kind: "ServiceAccount", namespace: "apps", name: "web" });
});

Principals("pods of one service account share one frozen principal, which nothing can change", () => {
  const first = accountOf("apps", "web");
  assert.is(accountOf("apps", "web"), first);
  assert.ok(Object.isFrozen(first) && Object.isFrozen(first.principal) && Object.isFrozen(first.principal.groups) && Object.isFrozen(first.principal.serviceAccount));
  assert.throws(() => (first.principal.groups as string[]).push("system:masters"));
  assert.is.not(accountOf("apps", "other"), first);
  assert.is.not(accountOf("other", "web"), first);
});

Principals("namespace and account are told apart however a made-up review splits them", () => {
  const a = accountOf("a/b", "c");
  const b = accountOf("a", "b/c");
  assert.is.not(a, b);
  assert.equal(a.principal.serviceAccount, { namespace: "a/b", name: "c" });
  assert.equal(b.principal.serviceAccount, { namespace: "a", name: "b/c" });
});

Principals("names longer than Kubernetes allows, which only a made-up review has, are not kept beyond their admission", () => {
  const long = "n".repeat(64);
  const first = accountOf(long, "web");
  assert.is.not(accountOf(long, "web"), first);
  assert.not.ok(isSharedPrincipal(first.principal));
  assert.is(first.principal.user, `system:serviceaccount:${long}:web`);
  assert.is.not(accountOf("apps", "a".repeat(254)), accountOf("apps", "a".repeat(254)));
  // At the limits they are kept.
  assert.is(accountOf("n".repeat(63), "a".repeat(253)), accountOf("n".repeat(63), "a".repeat(253)));
  assert.ok(isSharedPrincipal(accountOf("apps", "web").principal));
});

Principals("past the most kept, principals are made afresh and stay right", () => {
  const before = accountOf("apps", "web");
  for (let i = 0; i < 1100; i++) accountOf(`team-${i}`, "default");
  const after = accountOf("apps", "web");
  assert.equal(after, before);
  assert.is(accountOf("team-3", "default").principal.user, "system:serviceaccount:team-3:default");
});

Principals("the requesting user must hold use too when that check is on, and is never shared", () => {
  const on = usePrincipals(admission("CREATE", pod()), fakePorts({ settings: { authorizeRequestingUser: true } }));
  if ("problem" in on) throw new Error(on.problem);
  assert.equal(
    on.principals.map((p) => p.principal.user),
    ["system:serviceaccount:apps:default", "alice"],
  );
  assert.not.ok(Object.isFrozen(on.principals[1]!.principal));
});

Principals.run();
