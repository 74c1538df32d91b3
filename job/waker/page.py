"""The waker's bodies: the waiting page a browser gets, and the short JSON anything else gets.

The page polls its own URL with HEAD (which never wakes) every 2 seconds. While the namespace's route still
sends here, the answer carries `WAKER_HEADER`; the first answer without it comes from the app itself, and the page
reloads: the same browser session opens the app as soon as it answers. Where the policy asks for a click, the
page shows a button that POSTs to the same URL with `X-Nsscaler-Wake: click`.
"""

from __future__ import annotations

import datetime as dt
import html
import json

from job.waker.answer import CLICK_HEADER, RETRY_AFTER_SECONDS, Answer, Door

#: on every answer of the waker: the page tells its own answers from the app's by it
WAKER_HEADER = "X-Nsscaler-Waker"

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Waking {ns}</title>
<style>body{{font:16px system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em;color:#222}}
.s{{color:#555}}button{{font-size:1em;padding:.5em 1em}}</style></head>
<body><h1 id="title">{title}</h1>
<p>The namespace <strong id="namespace">{ns}</strong> is held by nsscaler (policy <code>{policy}</code>) to save
resources while nobody uses it.</p>
<p>{who} It stays awake until <span id="until">{until}</span> at most ({duration}), then it is held again.</p>
{button}
<p class="s" id="state">{state}</p>
<script>
const click = async () => {{
  document.getElementById("state").textContent = "Waking…";
  await fetch(location.href, {{method: "POST", headers: {{"{click_header}": "click"}}, cache: "no-store"}});
}};
const poll = async () => {{
  try {{
    const r = await fetch(location.href, {{method: "HEAD", cache: "no-store"}});
    if (!r.headers.has("{waker_header}")) {{ location.reload(); return; }}
  }} catch (e) {{}}
  setTimeout(poll, 2000);
}};
const b = document.getElementById("wake"); if (b) b.addEventListener("click", click);
setTimeout(poll, 2000);
</script></body></html>
"""


def page(answer: Answer, *, namespace: str, door: Door | None, now: dt.datetime, until: dt.datetime) -> str:
    ns = html.escape(namespace)
    if door is None:
        return f"<!doctype html><title>{ns}</title><p>{html.escape(answer.why)}</p>"
    click = door.click and not answer.wake and answer.why == "waiting for a click on the page"
    who = ("Anyone who can open this address may wake it, with the button below." if door.click
           else "Anyone who can open this address wakes it by opening it; this page opens the app when it is ready.")
    return _PAGE.format(
        ns=ns, policy=html.escape(door.policy), who=who, until=until.strftime("%Y-%m-%d %H:%M UTC"),
        duration=html.escape(door.max_duration), title="Wake " + ns + "?" if click else "Waking " + ns + "…",
        button='<p><button id="wake">Wake it</button></p>' if click else "",
        state="Waiting for the click." if click else "Waking: this page opens the app as soon as it answers.",
        click_header=CLICK_HEADER, waker_header=WAKER_HEADER)


def json_body(answer: Answer, *, namespace: str, door: Door | None, until: dt.datetime | None) -> str:
    body: dict[str, object] = {"namespace": namespace, "state": "waking" if answer.status == 503 else "refused",
                               "message": answer.why, "retryAfterSeconds": RETRY_AFTER_SECONDS}
    if door is not None and until is not None:
        body |= {"policy": door.policy, "awakeUntil": until.isoformat()}
    return json.dumps(body)
