// What a phone makes of the page as shown now (run by test_web_phone.py through Playwright).
//
// Returns the window's and the document's widths, and the first few of: the visible elements
// that reach past the window's right edge, the controls a finger hits that are under `tap`
// px high, and the visible text under `text` px.
({ tap, text }) => {
  const visible = (el) => el.checkVisibility() && !el.closest(".sr-only");
  const name = (el) => {
    const classes = el.className ? `.${el.className.split(" ").join(".")}` : "";
    const said = (el.innerText || el.value || el.getAttribute("aria-label") || "").trim();
    return `${el.tagName.toLowerCase()}${classes} "${said.slice(0, 40)}"`;
  };
  const wide = [];
  for (const el of document.querySelectorAll("body *")) {
    if (!visible(el)) continue;
    const box = el.getBoundingClientRect();
    if (box.width && box.right > window.innerWidth + 0.5) wide.push(`${name(el)} ends at ${box.right}`);
  }
  const small = [];
  for (const el of document.querySelectorAll("button, a, input, select, textarea, summary, label.choice")) {
    if (!visible(el)) continue;
    // A check box or radio button is hit through its label, measured as label.choice.
    if (el.matches("input[type=checkbox], input[type=radio]") && el.closest("label")) continue;
    const box = el.getBoundingClientRect();
    if (box.height < tap - 0.5) small.push(`${name(el)} is ${box.height} px high`);
  }
  const tiny = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || !visible(el)) continue;
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (size < text) tiny.push(`${name(el)} is ${size} px`);
  }
  return {
    innerWidth: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    bodyWidth: document.body.scrollWidth,
    wide: wide.slice(0, 8),
    small: small.slice(0, 8),
    tiny: tiny.slice(0, 8),
  };
}
