import type { HttpRequest, HttpResponseInit, InvocationContext } from "@azure/functions";
import { expandCredSpecs } from "../lib/gmsa/expandCredSpecs.js";
import { registerWebhook, serveWebhook } from "./webhook.js";

/** POST /mutate: inlines the named credential specs' contents into the pod. */
export async function mutate(request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  return serveWebhook("mutate", expandCredSpecs, request, context);
}

registerWebhook("mutate", expandCredSpecs, mutate);
