"""Runs redis-py, with its default options, against the server at URL, as a
user's program would: python3 redispy.py URL PREFIX. It prints one line of
JSON: what each step returned, or the error the client raised."""
import json
import sys

import redis

url, prefix = sys.argv[1], sys.argv[2]
out = {}
try:
    c = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)
    out["ping"] = c.ping()
    out["set"] = c.set(prefix + "s", "v", ex=100)
    out["get"] = c.get(prefix + "s")
    out["ttl"] = c.ttl(prefix + "s")
    out["missing"] = c.get(prefix + "missing")
    out["incr"] = [c.incr(prefix + "n"), c.incrby(prefix + "n", 9), c.decr(prefix + "n")]
    out["incrbyfloat"] = c.incrbyfloat(prefix + "n", 0.5)
    out["multi"] = c.pipeline(transaction=True).set(prefix + "m", "1").incr(prefix + "m").execute()
    c.close()
    print(json.dumps(out))
except Exception as e:  # the client's error, reported to the test
    out.update(error=type(e).__name__, message=str(e))
    print(json.dumps(out))
    sys.exit(1)
