// A second floor for the production path's cold start, for `npm run bench`: the minimal app
// (bench/minimalApp.js) plus the least any webhook that reads its cluster the product's way does.
// At start it gets a managed identity token with @azure/identity, as a Function App does; each
// admission that names a credential spec reads that spec with one GET through undici, over one
// kept-alive connection (HTTP/2 where the API server offers it), then answers the minimal app's
// fixed AdmissionReview (bench/fixedAnswer.js). No cache, no checks: its warm figures would mean
// nothing, and the bench times only its starts. An ES module, so that esbuild keeps only the
// credential it uses. (The scope is written out: importing the product's would bring its modules.)
import { app } from "@azure/functions";
import { ManagedIdentityCredential } from "@azure/identity";
import { Agent, request } from "undici";
import { fixedAnswer } from "./fixedAnswer.js";

// The AKS server application's scope, as the product asks for it.
const scope = "6dae42f8-4368-4678-94ff-3960e28e3630/.default";
let cluster;

app.hook.appStart(async () => {
  const credential = new ManagedIdentityCredential({ clientId: process.env.AZURE_CLIENT_ID });
  const dispatcher = new Agent({ connect: { ca: process.env.GMSA_API_SERVER_CA, keepAlive: true } });
  const { token } = await credential.getToken(scope);
  cluster = { server: process.env.GMSA_API_SERVER_URL, dispatcher, token };
});

async function answer(httpRequest) {
  const review = JSON.parse(await httpRequest.text());
  const uid = review?.request?.uid;
  const name = review?.request?.object?.spec?.containers?.[0]?.securityContext?.windowsOptions?.gmsaCredentialSpecName;
  if (typeof name === "string") {
    const response = await request(`${cluster.server}/apis/windows.k8s.io/v1/gmsacredentialspecs/${encodeURIComponent(name)}`, {
      dispatcher: cluster.dispatcher,
      headers: { authorization: `Bearer ${cluster.token}`, accept: "application/json" },
    });
    const spec = await response.body.json();
    if (response.statusCode !== 200) throw new Error(`GET ${name}: ${response.statusCode} ${JSON.stringify(spec).slice(0, 200)}`);
  }
  return fixedAnswer(uid);
}

for (const name of ["mutate", "validate", "validate-credspec"]) {
  app.http(name, { route: name, methods: ["POST"], authLevel: "anonymous", handler: answer });
}
