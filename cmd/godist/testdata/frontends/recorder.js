// The DOM recorder of the browser test, for the pages built here: window.__godist records a
// snapshot of every cell's outputs each time the DOM changes (browser_test.go's cellSnapshot),
// so that no drawn state is missed however fast the updates come; take() hands over and
// clears the records. page.cells() gives each cell's element, prompt and nbformat outputs.
export function installRecorder(page) {
  const cellSnap = (c) => {
    const el = c.el;
    const out = {bars: [], fit: "", fitbox: "", buttons: [], panel: null, prompt: c.prompt, errors: [], stream: ""};
    el.querySelectorAll(".progress-bar").forEach(b => out.bars.push(parseFloat(b.style.width) || 0));
    const pres = el.querySelectorAll(".widget-html-content pre");
    if (pres.length) out.fit = pres[pres.length - 1].textContent;
    const boxes = el.querySelectorAll(".widget-vbox");
    if (boxes.length) out.fitbox = boxes[boxes.length - 1].innerText;
    el.querySelectorAll(page.outputSelector + " button").forEach(b => out.buttons.push(b.textContent.trim()));
    const table = el.querySelector("table.godist-cluster-panel");
    if (table) {
      const st = el.querySelector(".godist-cluster-status");
      out.panel = {status: st ? st.textContent : "", rows: []};
      table.querySelectorAll("tr").forEach(tr => {
        const tds = Array.from(tr.querySelectorAll("td")).map(td => td.textContent);
        if (tds.length) out.panel.rows.push(tds);
      });
    }
    for (const o of c.outputs) {
      if (o.output_type === "error") out.errors.push(o.ename + ": " + o.evalue);
      if (o.output_type === "stream") out.stream += Array.isArray(o.text) ? o.text.join("") : o.text;
    }
    return out;
  };
  const g = window.__godist = {log: [], last: ""};
  g.snap = () => page.cells().map(cellSnap);
  g.take = () => { g.record(); const l = g.log; g.log = []; return l; };
  g.record = () => {
    const s = JSON.stringify(g.snap());
    if (s !== g.last) { g.last = s; g.log.push(JSON.parse(s)); }
  };
  new MutationObserver(g.record).observe(page.container,
    {subtree: true, childList: true, attributes: true, characterData: true});
  g.record();
}

// probe runs code in kernel (a @jupyterlab/services kernel connection) without a cell and
// resolves to "STATUS OUTPUT" once it has both the reply and the kernel's idle status.
export function probe(kernel, code, metadata) {
  return new Promise((resolve, reject) => {
    let out = "";
    const future = kernel.requestExecute({code, silent: false, store_history: false}, true, metadata);
    future.onIOPub = (m) => {
      const c = m.content;
      if (m.header.msg_type === "execute_result" || m.header.msg_type === "display_data") {
        if (c.data && c.data["text/plain"] !== undefined) out += c.data["text/plain"];
      } else if (m.header.msg_type === "stream") out += c.text;
      else if (m.header.msg_type === "error") out += c.ename + ": " + c.evalue;
    };
    // future.done resolves after both the reply and the idle status.
    future.done.then(reply => resolve(reply.content.status + " " + out), reject);
  });
}
