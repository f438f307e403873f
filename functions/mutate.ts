import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import { expandCredSpecs } from "../lib/gmsa/expandCredSpecs.js";
import { allMethods, serveWebhook, webhookAuthLevel } from "./webhook.js";

/** POST /mutate: inlines the named credential specs' contents into the pod. */
export async function mutate(request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  return serveWebhook("mutate", expandCredSpecs, request, context);
}

app.http("mutate", { route: "mutate", methods: [...allMethods], authLevel: webhookAuthLevel(), handler: mutate });
