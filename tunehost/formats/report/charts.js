// tunehost report: draws each TG-over-time chart with uPlot from the JSON data block (numbers and fixed words
// only: every text of the page is in its HTML, escaped). Marks are numbered dashed lines; the table under the
// chart says what each number is.
(function () {
  "use strict";
  var TONES = { slower: "#cf222e", faster: "#1a7f37", neutral: "#6e7781", change: "#0969da" };
  var block = document.getElementById("report-data");
  if (!block || typeof uPlot === "undefined") { return; }
  var data = JSON.parse(block.textContent);
  var charts = [];

  function widthOf(el) { return Math.max(240, Math.floor(el.getBoundingClientRect().width || 600)); }
  function heightOf(w) { return w < 500 ? 200 : 260; }

  function marksPlugin(marks) {
    return {
      hooks: {
        draw: [function (u) {
          var ctx = u.ctx, dpr = window.devicePixelRatio || 1, box = u.bbox;
          ctx.save();
          ctx.font = Math.round(11 * dpr) + "px sans-serif";
          for (var i = 0; i < marks.length; i++) {
            var m = marks[i];
            var x = Math.round(u.valToPos(m.x, "x", true));
            if (x < box.left - 1 || x > box.left + box.width + 1) { continue; }
            ctx.strokeStyle = TONES[m.tone] || TONES.neutral;
            ctx.fillStyle = ctx.strokeStyle;
            ctx.lineWidth = 1.5 * dpr;
            ctx.setLineDash([5 * dpr, 4 * dpr]);
            ctx.beginPath();
            ctx.moveTo(x, box.top);
            ctx.lineTo(x, box.top + box.height);
            ctx.stroke();
            ctx.fillText(String(m.n), x + 3 * dpr, box.top + 12 * dpr + (i % 3) * 12 * dpr);
          }
          ctx.restore();
        }]
      }
    };
  }

  function draw(s, i) {
    var el = document.getElementById("chart-" + i);
    if (!el || !s.x.length) { return; }
    var xs = s.x.slice(), lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs);
    var w = widthOf(el);
    var opts = {
      width: w, height: heightOf(w),
      plugins: [marksPlugin(s.marks)],
      scales: { x: { time: true, range: function (u, a, b) {
        var pad = Math.max((b - a) * 0.04, 3600);
        return [Math.min(a, lo) - pad, Math.max(b, hi) + pad];
      } }, y: { range: function (u, a, b) { return [0, Math.max(b * 1.1, 1)]; } } },
      series: [{}, { label: "TG t/s", stroke: "#0969da", width: 2, points: { show: xs.length <= 80, size: 6 },
                     value: function (u, v) { return v == null ? "—" : v.toFixed(2); } }],
      axes: [{}, { label: "t/s", size: 56 }],
      legend: { show: true }
    };
    var chart = new uPlot(opts, [s.x, s.y], el);
    el.setAttribute("data-drawn", String(s.x.length));
    charts.push({ chart: chart, el: el });
  }

  for (var i = 0; i < data.series.length; i++) { draw(data.series[i], i); }

  function resize(width) {
    for (var i = 0; i < charts.length; i++) {
      var w = width || widthOf(charts[i].el);
      charts[i].chart.setSize({ width: w, height: heightOf(w) });
    }
  }
  var pending = null;
  window.addEventListener("resize", function () {
    if (pending) { clearTimeout(pending); }
    pending = setTimeout(function () { resize(0); }, 100);
  });
  window.addEventListener("beforeprint", function () { resize(660); });
  window.addEventListener("afterprint", function () { resize(0); });
  document.documentElement.setAttribute("data-charts", String(charts.length));
})();
