// One load run for bench/load.ts, in a process of its own: autocannon keeps the given number of
// kept-alive HTTPS connections posting the same AdmissionReview for the given time. autocannon's
// own percentiles are whole milliseconds (its histogram keeps integers), too coarse for the
// 2–7 ms an answer takes here: the floor's p99 of "3 ms" may be anything from 3.0 to 3.99. So every
// successful answer's time, which autocannon measures with hrtime, is kept and the percentiles are
// read from all of them. Prints one JSON object.
"use strict";
const { readFileSync } = require("node:fs");
const autocannon = require("autocannon");

const [url, connections, seconds, bodyFile] = process.argv.slice(2);

const times = [];
const instance = autocannon(
  {
    url,
    connections: Number(connections),
    duration: Number(seconds),
    method: "POST",
    headers: { "content-type": "application/json" },
    body: readFileSync(bodyFile),
  },
  (error, result) => {
    if (error) {
      console.error(error);
      process.exit(1);
    }
    const sorted = Float64Array.from(times).sort();
    const at = (fraction) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)]);
    process.stdout.write(
      JSON.stringify({
        answered: result["2xx"],
        failed: result.non2xx + result.errors,
        timed: sorted.length,
        p50Ms: at(0.5),
        p99Ms: at(0.99),
      }),
    );
  },
);
instance.on("response", (_client, statusCode, _bytes, responseTime) => {
  if (statusCode >= 200 && statusCode < 300) times.push(responseTime);
});
