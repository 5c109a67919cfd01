"""`GET /compactkit/`: the caller's own conversations as one self-contained HTML page (no
external asset: styles and script inline), and the savings figures it shows.

What a conversation saved is read from what the provider reported (its usage: fresh input, cache
reads and writes, output), priced under the provider's profile (`compactkit.pricing`), against
what the client sent: had the client's prompts gone upstream as they came, each prompt token
category would have been larger by the ratio of the client's tokens to the tokens sent (both by
compactkit's count). The page says so beside the figure.
"""

from __future__ import annotations

import json
from typing import Any

from ..pricing import PricingProfile, get_profile
from .conversations import Conversation, Usage


def profile_of(key: str) -> PricingProfile:
    """The pricing of conversation `key` (named `API:tag`): Anthropic's or OpenAI's."""
    return get_profile("anthropic" if key.startswith("anthropic:") else "openai")


def paid(usage: Usage, profile: PricingProfile) -> tuple[float, float]:
    """Dollars (prompt, output) the provider's reported `usage` costs under `profile`."""
    prompt = (
        usage.input_tokens
        + usage.cache_read_tokens * profile.cache_read
        + usage.cache_write_tokens * profile.cache_write
    ) * profile.input
    return prompt / 1_000_000, usage.output_tokens * profile.output / 1_000_000


def savings(conv: Conversation) -> dict[str, Any]:
    """What `conv` saved: tokens (client's minus sent, compactkit's count) and dollars (the
    reported prompt cost scaled to what the client sent, minus the reported prompt cost and
    what the summary calls cost)."""
    profile = profile_of(conv.key)
    prompt, output = paid(conv.usage, profile)
    summaries = sum(paid(conv.summary_usage, profile))
    ratio = conv.tokens_client / conv.tokens_sent if conv.tokens_sent else 1.0
    saved = prompt * ratio - prompt - summaries if conv.usage.responses else 0.0
    return {
        "tokens_saved": conv.tokens_client - conv.tokens_sent,
        "dollars_paid": round(prompt + output + summaries, 6),
        "dollars_saved": round(saved, 6),
    }


def render(data: dict[str, Any]) -> str:
    """The page of `data` (`/compactkit/stats`'s JSON for the caller): the figures are drawn by
    the page's own script from the JSON embedded in it, or from `/compactkit/stats` fetched with a
    key typed into the page (sent as a header to this gateway only, never stored)."""
    embedded = json.dumps(data, ensure_ascii=True).replace("<", "\\u003c")
    return _PAGE.replace("__DATA__", embedded)


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>compactkit gateway</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;padding:1.5rem;color:#1d2430;background:#fafbfc}
h1{font-size:1.3rem;margin:0 0 .3rem} p.sub{margin:0 0 1rem;color:#566}
.cards{display:flex;flex-wrap:wrap;gap:.8rem;margin:1rem 0}
.card{background:#fff;border:1px solid #dde2e8;border-radius:6px;padding:.6rem .9rem;min-width:9rem}
.card b{display:block;font-size:1.35rem} .card span{color:#566;font-size:.85rem}
table{border-collapse:collapse;width:100%;background:#fff;font-size:.85rem}
th,td{border:1px solid #dde2e8;padding:.3rem .5rem;text-align:right}
th{background:#eef1f5} td.key{text-align:left;font-family:monospace}
form{margin:1rem 0} input{font:inherit;padding:.2rem .4rem;width:18rem}
.note{color:#566;font-size:.8rem;max-width:60rem} .bad{color:#a11}
</style></head><body>
<h1>compactkit gateway</h1>
<p class="sub" id="setup"></p>
<div class="cards" id="cards"></div>
<table id="conversations"><thead><tr><th>conversation</th><th>requests</th>
<th>compactions</th><th>tokens client sent</th><th>tokens sent upstream</th><th>tokens saved</th>
<th>reported input</th><th>cache reads</th><th>cache writes</th><th>output</th>
<th>paid ($)</th><th>saved ($)</th><th>model summaries</th><th>failures</th></tr></thead>
<tbody></tbody></table>
<form id="key"><label>Another API key's conversations: <input type="password" name="key"
autocomplete="off"></label> <button>show</button> <span id="status"></span></form>
<p class="note">Shown: the conversations of the credential this page was asked with (its salted
hash; the key itself is never kept). Dollars are priced from the usage the provider reported; saved
is that prompt cost scaled up to the tokens the client sent, minus what was paid (the model's
summary calls included). Model summaries: compactions whose summary the agent's own model wrote,
of the summaries asked for.</p>
<script id="data" type="application/json">__DATA__</script>
<script>
"use strict";
const fmt = (n) => Number(n).toLocaleString("en-US");
const usd = (n) => "$" + Number(n).toFixed(4);
function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
}
function draw(data) {
  document.getElementById("setup").textContent = "pipeline " + data.pipeline +
    " · summarizer " + data.summarizer + " · trigger " + fmt(data.trigger) +
    " · target " + fmt(data.target);
  const t = data.totals;
  const cards = [["conversations", fmt(Object.keys(data.conversations).length)],
    ["requests", fmt(t.requests)], ["compactions", fmt(t.compactions)],
    ["tokens saved", fmt(t.tokens_saved)], ["dollars saved", usd(t.dollars_saved)],
    ["paid (reported)", usd(t.dollars_paid)], ["failures", fmt(t.failures)]];
  const box = document.getElementById("cards");
  box.replaceChildren();
  for (const [label, value] of cards) {
    const div = document.createElement("div");
    div.className = "card";
    const b = document.createElement("b");
    b.textContent = value;
    const s = document.createElement("span");
    s.textContent = label;
    div.append(b, s);
    box.appendChild(div);
  }
  const body = document.querySelector("#conversations tbody");
  body.replaceChildren();
  for (const [key, c] of Object.entries(data.conversations)) {
    const row = document.createElement("tr");
    cell(row, key.slice(0, 24), "key");
    for (const n of [c.requests, c.compactions, c.tokens_client, c.tokens_sent,
      c.tokens_saved, c.usage.input_tokens, c.usage.cache_read_tokens,
      c.usage.cache_write_tokens, c.usage.output_tokens]) cell(row, fmt(n));
    cell(row, usd(c.dollars_paid));
    cell(row, usd(c.dollars_saved));
    cell(row, fmt(c.summaries_used) + " of " + fmt(c.summary_calls));
    cell(row, fmt(c.failures), c.failures ? "bad" : "");
    body.appendChild(row);
  }
}
draw(JSON.parse(document.getElementById("data").textContent));
document.getElementById("key").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = event.target.elements.key.value;
  const status = document.getElementById("status");
  try {
    const got = await fetch("stats", {headers: {"x-api-key": key}});
    draw(await got.json());
    status.textContent = "";
  } catch (err) {
    status.textContent = "could not read the figures";
  }
});
</script></body></html>
"""
