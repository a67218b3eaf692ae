// Drawing a graph: the Mermaid text of GET /v1/graph or GET /v1/threads/{thread}/graph,
// rendered to SVG by the Mermaid build shipped with the server (web/vendor/, no CDN). A thread's
// marked nodes carry the classes waiting, done, failed and next.

import { h } from "./dom.js";

const SCRIPT = new URL("./vendor/mermaid.min.js", import.meta.url).href;
let loading = null;
let drawn = 0;

/** Mermaid, loaded once (its browser build sets `window.mermaid`) and initialised. */
function loadMermaid() {
  if (loading === null) {
    loading = new Promise((resolve, reject) => {
      if (window.mermaid) {
        resolve(window.mermaid);
        return;
      }
      const script = document.createElement("script");
      script.src = SCRIPT;
      script.async = true;
      script.onload = () => {
        if (window.mermaid) resolve(window.mermaid);
        else reject(new Error(`${SCRIPT} loaded, but did not define mermaid`));
      };
      script.onerror = () => reject(new Error(`the renderer could not be loaded from ${SCRIPT}`));
      document.head.append(script);
    }).then((mermaid) => {
      // strict: labels are sanitised and click handlers are off; nothing runs from the text.
      mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
      return mermaid;
    });
    loading.catch(() => {
      loading = null; // a later call tries again
    });
  }
  return loading;
}

/**
 * Render Mermaid `text` into `element` and return the `<svg>` element. If it cannot be drawn,
 * `element` shows an error line and the text in a `<pre>`, and the result is null.
 */
export async function renderGraph(element, text) {
  const id = `interlock-graph-${++drawn}`;
  try {
    const mermaid = await loadMermaid();
    const { svg, bindFunctions } = await mermaid.render(id, text);
    // Mermaid's own output, its labels sanitised (securityLevel "strict"): not the text's HTML.
    element.innerHTML = svg;
    bindFunctions?.(element);
    const drawing = element.querySelector("svg");
    if (drawing === null) throw new Error("the renderer returned no picture");
    return drawing;
  } catch (error) {
    document.getElementById(`d${id}`)?.remove(); // what a failed render may leave behind
    element.replaceChildren(
      h("p", { className: "error", role: "alert" }, `The graph could not be drawn: ${error?.message ?? error}`),
      h("pre", { className: "graph-text", tabindex: 0, "aria-label": "The graph as Mermaid text" }, text),
    );
    return null;
  }
}
