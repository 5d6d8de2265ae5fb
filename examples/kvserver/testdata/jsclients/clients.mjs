// Runs one Redis client for Node.js, with its default options, against the
// server at URL, as a user's program would: node clients.mjs CLIENT URL
// PREFIX, where CLIENT is redis4, redis5, redis (6), ioredis5 or ioredis
// (6). It prints one line of JSON: what each step returned, or the error
// the client raised. A client that cannot connect (node-redis reconnects
// forever) is given up after 10 s.
import * as redis4 from "redis4";
import * as redis5 from "redis5";
import * as redis6 from "redis";
import IORedis5 from "ioredis5";
import IORedis6 from "ioredis";

const [name, url, prefix] = process.argv.slice(2);
const k = (s) => prefix + s;
const giveUp = setTimeout(() => {
  console.log(JSON.stringify({ error: "timeout", message: "no answer within 10 s" }));
  process.exit(1);
}, 10000);

const nodeRedis = { redis4, redis5, redis: redis6 }[name];
const ioredis = { ioredis5: IORedis5, ioredis: IORedis6 }[name];
const out = {};
try {
  if (nodeRedis) {
    const c = nodeRedis.createClient({ url });
    c.on("error", (e) => { out.lastError = String(e); });
    await c.connect();
    out.ping = await c.ping();
    out.set = await c.set(k("s"), "v", { EX: 100 });
    out.get = await c.get(k("s"));
    out.ttl = await c.ttl(k("s"));
    out.missing = await c.get(k("missing"));
    out.incr = [await c.incr(k("n")), await c.incrBy(k("n"), 9), await c.decr(k("n"))];
    out.incrbyfloat = await c.incrByFloat(k("n"), 0.5);
    out.multi = await c.multi().set(k("m"), "1").incr(k("m")).exec();
    await (c.close ? c.close() : c.quit());
  } else if (ioredis) {
    const c = new ioredis(url, { maxRetriesPerRequest: 1 });
    c.on("error", (e) => { out.lastError = String(e); });
    out.ping = await c.ping();
    out.set = await c.set(k("s"), "v", "EX", 100);
    out.get = await c.get(k("s"));
    out.ttl = await c.ttl(k("s"));
    out.missing = await c.get(k("missing"));
    out.incr = [await c.incr(k("n")), await c.incrby(k("n"), 9), await c.decr(k("n"))];
    out.incrbyfloat = await c.incrbyfloat(k("n"), 0.5);
    out.multi = (await c.multi().set(k("m"), "1").incr(k("m")).exec()).map(([err, v]) => err ?? v);
    await c.quit();
  } else {
    throw new Error("unknown client " + name);
  }
  console.log(JSON.stringify(out));
} catch (e) {
  console.log(JSON.stringify({ ...out, error: e.name, message: e.message }));
  process.exitCode = 1;
}
clearTimeout(giveUp);
