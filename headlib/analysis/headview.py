"""An interactive head view (after bertviz's): one self-contained HTML block with the source
tokens twice, a line from each query token to each key token whose opacity is the attention
weight, and selectors for sentence, layer and head. Hovering a token shows only its lines.

No external scripts or styles, so it renders in the static book and offline.
"""
from __future__ import annotations

import hashlib
import html
import json

import numpy as np

SCRIPT = """
(function () {
  const root = document.getElementById("%(id)s");
  const data = JSON.parse(root.querySelector("script[type='application/json']").textContent);
  const [sel, lay, hd] = ["sentence", "layer", "head"].map(n => root.querySelector("select[name=" + n + "]"));
  const svg = root.querySelector("svg");
  const ns = "http://www.w3.org/2000/svg", rowH = 18, width = 360, pad = 130;
  const lines = document.createElementNS(ns, "g");
  function drawLines(focus) {   // tokens stay; only the lines change (hovering must not redraw tokens)
    const w = data.sentences[+sel.value].attention[+lay.value][+hd.value];
    lines.replaceChildren();
    w.forEach((row, i) => row.forEach((a, j) => {
      if (a < 0.02 || (focus !== null && focus !== i)) return;
      const l = document.createElementNS(ns, "line");
      l.setAttribute("x1", pad); l.setAttribute("y1", i * rowH + 10);
      l.setAttribute("x2", width - pad); l.setAttribute("y2", j * rowH + 10);
      l.setAttribute("stroke", "#1f77b4"); l.setAttribute("stroke-width", 2);
      l.setAttribute("stroke-opacity", a.toFixed(3));
      lines.appendChild(l);
    }));
  }
  function draw() {
    const s = data.sentences[+sel.value];
    svg.setAttribute("height", s.tokens.length * rowH + 10);
    svg.replaceChildren(lines);
    s.tokens.forEach((t, i) => {
      [[pad - 6, "end"], [width - pad + 6, "start"]].forEach(([x, anchor], side) => {
        const el = document.createElementNS(ns, "text");
        el.setAttribute("x", x); el.setAttribute("y", i * rowH + 14);
        el.setAttribute("text-anchor", anchor); el.setAttribute("class", "hv-token");
        el.textContent = t;
        if (side === 0) { el.onmouseenter = () => drawLines(i); el.onmouseleave = () => drawLines(null); }
        svg.appendChild(el);
      });
    });
    drawLines(null);
  }
  [sel, lay, hd].forEach(s => s.onchange = draw);
  draw();
})();
"""


def head_view_html(sentences: list[list[str]], attention: list[np.ndarray], layer: int = 0, head: int = 0,
                   labels: list[str] | None = None) -> str:
    """HTML for sentences (their tokens) and their attention maps, each (layers, heads, T, T)
    with T = len(tokens); `layer` and `head` (0-based) are selected first."""
    if len(sentences) != len(attention):
        raise ValueError(f"{len(sentences)} sentences but {len(attention)} attention maps")
    for tokens, a in zip(sentences, attention):
        if a.ndim != 4 or a.shape[2:] != (len(tokens), len(tokens)):
            raise ValueError(f"attention of shape {a.shape} does not fit {len(tokens)} tokens")
    n_layers, n_heads = attention[0].shape[:2]
    data = {"sentences": [{"tokens": t, "attention": np.round(a.astype(float), 3).tolist()}
                          for t, a in zip(sentences, attention)]}
    labels = labels or [" ".join(t)[:60] for t in sentences]
    payload = json.dumps(data).replace("</", "<\\/")   # JSON inside <script>: no closing tag
    # an id from the content, so that the same view renders to the same HTML (a page's glued values compare equal)
    div = "hv-" + hashlib.sha1(json.dumps([payload, labels, layer, head]).encode()).hexdigest()[:8]

    def options(names, chosen):
        return "".join(f'<option value="{i}"{" selected" if i == chosen else ""}>{html.escape(n)}</option>'
                       for i, n in enumerate(names))
    return (f'<div id="{div}" class="headview">'
            '<style>.headview select{margin-right:1em}.headview .hv-token{font:13px monospace;cursor:default}</style>'
            f'<label>sentence <select name="sentence">{options(labels, 0)}</select></label>'
            f'<label>layer <select name="layer">{options([str(i + 1) for i in range(n_layers)], layer)}</select></label>'
            f'<label>head <select name="head">{options([str(i + 1) for i in range(n_heads)], head)}</select></label>'
            '<br><svg width="360" height="10"></svg>'
            f'<script type="application/json">{payload}</script>'
            f"<script>{SCRIPT % {'id': div}}</script></div>")
