"""The waker: the always-on door of namespaces that wake on request (`spec.wake.on_request`).

While a namespace is held, nsscaler points its HTTPRoutes at the waker (`job.decide.routes`), and the gateway
sets a header naming the namespace on every request it sends here (a client's own value is replaced). The
waker answers each request with 503 and `Retry-After`: a waiting page to a browser, a short JSON body to anything
else; and, for a request that may wake (not HEAD, not a health checker, within the per-namespace rate limit, a
click where the policy asks for one), it creates the namespace's one Wake (fixed name) and starts a run at once:
a Job from the CronJob's template. Once the namespace is awake and its workloads available, the run restores the
routes, and traffic never passes through the waker again: no latency, no cut WebSockets.

- `answer`: what to answer and whether to wake (pure);
- `page`: the waiting page and the JSON body;
- `actions`: the Wake and the Job, through the one API client (`job.cluster.kube`);
- `server`: the HTTP server; `main`: its entry point (`nsscaler-waker`).

The HTTP server is aiohttp: one package gives an asyncio server, request timeouts and graceful shutdown on
SIGTERM (a Deployment's rolling update) with no ASGI server beside it (starlette would need uvicorn and more
locked packages). The API calls go through the job's own synchronous client, each in a worker thread, so there is
still one way to the API server.
"""
