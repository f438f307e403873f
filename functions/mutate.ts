import type { HttpRequest, HttpResponseInit, InvocationContext } from "@azure/functions";
import { expandCredSpecs } from "../lib/gmsa/expandCredSpecs.js";
import { podWebhook } from "../lib/gmsa/podWebhook.js";
import { registerWebhook, serveWebhook } from "./webhook.js";

const policy = podWebhook(expandCredSpecs);

/** POST /mutate: inlines the named credential specs' contents into the pod. */
export async function mutate(request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  return serveWebhook("mutate", policy, request, context);
}

registerWebhook("mutate", policy, mutate);
