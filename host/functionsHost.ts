import { app, HttpRequest, InvocationContext, type HttpHandler, type HttpResponse, type HttpResponseInit, type Timer, type TimerHandler } from "@azure/functions";
import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Cron } from "croner";

/**
 * Plays the Functions host's part on this machine: loads every module of functions/ (as the
 * package's `main` glob does), keeps what they register with `app.http`, `app.timer` and
 * `app.hook.appStart`, runs the start hooks, and routes requests to the same handlers with the
 * same request, context and response types; `npm start` runs the timers on their schedules.
 */
export interface HttpRegistration {
  readonly name: string;
  readonly route: string;
  readonly methods: readonly string[];
  readonly authLevel: "anonymous" | "function" | "admin";
  readonly handler: HttpHandler;
}

export interface TimerRegistration {
  readonly name: string;
  /** The Functions timer's NCRONTAB expression: six fields, seconds first. */
  readonly schedule: string;
  readonly handler: TimerHandler;
}

export interface RouteMatch {
  readonly registration: HttpRegistration;
  /** The values of the route's `{parameters}`, as the Functions host hands them in `request.params`. */
  readonly params: Readonly<Record<string, string>>;
}

export interface LoadedApp {
  readonly registrations: readonly HttpRegistration[];
  readonly timers: readonly TimerRegistration[];
  find(path: string): RouteMatch | undefined;
}

const noParams: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Routes as the Functions host reads them: literal segments, and `{name}` segments that take any
 * one non-empty segment. A literal route wins over a template, and a template with more literal
 * segments over one with fewer, as in the Functions host's routing.
 */
export function routeMatcher(registrations: readonly HttpRegistration[]): (path: string) => RouteMatch | undefined {
  const literal = new Map<string, RouteMatch>();
  const templates: Array<{ readonly registration: HttpRegistration; readonly segments: readonly string[]; readonly literals: number }> = [];
  for (const registration of registrations) {
    const segments = registration.route.split("/");
    if (!segments.some(isParameter)) {
      if (!literal.has(registration.route)) literal.set(registration.route, { registration, params: noParams });
    } else templates.push({ registration, segments, literals: segments.filter((s) => !isParameter(s)).length });
  }
  templates.sort((a, b) => b.literals - a.literals);
  return (path) => {
    const trimmed = path.replace(/^\/+|\/+$/g, "");
    const exact = literal.get(trimmed);
    if (exact) return exact;
    const parts = trimmed.split("/");
    for (const template of templates) {
      if (template.segments.length !== parts.length) continue;
      const params: Record<string, string> = {};
      const matched = template.segments.every((segment, i) => {
        const part = parts[i]!;
        if (!isParameter(segment)) return segment === part;
        if (part === "") return false;
        params[segment.slice(1, -1)] = part;
        return true;
      });
      if (matched) return { registration: template.registration, params };
    }
    return undefined;
  };
}

function isParameter(segment: string): boolean {
  return segment.startsWith("{") && segment.endsWith("}");
}

const functionsDir = join(__dirname, "..", "functions");
let loaded: Promise<LoadedApp> | undefined;

export function loadFunctionsApp(): Promise<LoadedApp> {
  loaded ??= load();
  return loaded;
}

async function load(): Promise<LoadedApp> {
  const registrations: HttpRegistration[] = [];
  const startHooks: Array<() => unknown> = [];
  Reflect.set(app, "http", (name: string, options: { route?: string; methods?: string[]; authLevel?: HttpRegistration["authLevel"]; handler: HttpHandler }) => {
    registrations.push({
      name,
      route: (options.route ?? name).replace(/^\/+/, ""),
      methods: options.methods ?? ["GET", "POST"],
      authLevel: options.authLevel ?? "anonymous",
      handler: options.handler,
    });
  });
  const timers: TimerRegistration[] = [];
  Reflect.set(app, "timer", (name: string, options: { schedule: string; handler: TimerHandler }) => {
    timers.push({ name, schedule: options.schedule, handler: options.handler });
  });
  Reflect.set(app.hook, "appStart", (handler: () => unknown) => {
    startHooks.push(handler);
    return { dispose() {} };
  });
  const modules = readdirSync(functionsDir).filter((file) => /\.(ts|js)$/.test(file) && !file.endsWith(".d.ts"));
  // require, not import(): the modules must share state (the runtime) with the host that loads them.
  for (const file of modules.sort()) require(join(functionsDir, file));
  for (const hook of startHooks) await hook();
  return { registrations, timers, find: routeMatcher(registrations) };
}

export interface RunningTimers {
  stop(): void;
}

/**
 * Runs each timer on its schedule, as the Functions host does: one invocation at a time per timer
 * (a run still going when the next is due skips that one), with a Timer and an InvocationContext
 * whose log lines go to `log`. A run that throws is logged and the schedule goes on.
 */
export function runTimers(timers: readonly TimerRegistration[], log: (level: string, message: string) => void): RunningTimers {
  const jobs = timers.map(
    (timer) =>
      new Cron(timer.schedule, { protect: true }, async () => {
        const context = new InvocationContext({
          functionName: timer.name,
          invocationId: randomUUID(),
          logHandler: (level, ...args) => log(level, args.map(String).join(" ")),
        });
        const tick: Timer = { isPastDue: false, schedule: { adjustForDST: true }, scheduleStatus: { last: "", next: "", lastUpdated: "" } };
        try {
          await timer.handler(tick, context);
        } catch (error) {
          log("error", `the ${timer.name} timer failed: ${error instanceof Error ? error.message : String(error)}`);
        }
      }),
  );
  return {
    stop() {
      for (const job of jobs) job.stop();
    },
  };
}

export interface LocalCall {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body?: Uint8Array;
}

export interface LocalReply {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Uint8Array;
}

/** Invokes one registration as the Functions host would, and flattens its response. */
export async function invoke(registration: HttpRegistration, call: LocalCall, log: (level: string, message: string) => void): Promise<LocalReply> {
  const request = new HttpRequest({
    method: call.method,
    url: call.url,
    headers: call.headers,
    ...(call.body && call.body.byteLength > 0 ? { body: { bytes: call.body } } : {}),
  });
  const context = new InvocationContext({
    functionName: registration.name,
    invocationId: randomUUID(),
    logHandler: (level, ...args) => log(level, args.map(String).join(" ")),
  });
  const response: HttpResponseInit | HttpResponse = await registration.handler(request, context);
  return flatten(response);
}

async function flatten(response: HttpResponseInit | HttpResponse): Promise<LocalReply> {
  const headers: Record<string, string> = {};
  new Headers(response.headers as ConstructorParameters<typeof Headers>[0]).forEach((value, key) => (headers[key] = value));
  let body: Uint8Array;
  if ("arrayBuffer" in response && typeof response.arrayBuffer === "function") {
    body = new Uint8Array(await response.arrayBuffer());
  } else if ((response as HttpResponseInit).jsonBody !== undefined) {
    body = Buffer.from(JSON.stringify((response as HttpResponseInit).jsonBody));
    headers["content-type"] ??= "application/json";
  } else {
    const raw = (response as HttpResponseInit).body;
    body = typeof raw === "string" ? Buffer.from(raw) : raw instanceof Uint8Array ? raw : Buffer.alloc(0);
  }
  return { status: response.status ?? 200, headers, body };
}
