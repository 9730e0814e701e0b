// History plots with uPlot (served by the gateway from its npm package: no request leaves the LAN).
let loading;

/** Loads uPlot's script and style once, on the first page that plots. */
export function loadPlotting() {
  loading ??= new Promise((resolve, reject) => {
    const css = document.createElement('link');
    css.rel = 'stylesheet';
    css.href = 'vendor/uPlot.min.css';
    document.head.append(css);
    const script = document.createElement('script');
    script.src = 'vendor/uPlot.iife.min.js';
    script.onload = resolve;
    script.onerror = () => reject(new Error('could not load the plotting library'));
    document.head.append(script);
  });
  return loading;
}

/** Plots `points` ([{at, value}] oldest first); returns a handle that appends live values. */
export function plotHistory(container, asset, points) {
  const xs = points.map((p) => new Date(p.at).getTime() / 1000);
  const ys = points.map((p) => (typeof p.value === 'number' ? p.value : null));
  const holder = document.createElement('div');
  holder.className = 'plot';
  holder.dataset.points = String(xs.length);
  holder.setAttribute('role', 'img');
  holder.setAttribute('aria-label', `Plot of ${asset.name}: ${xs.length} states`);
  container.append(holder);
  const unit = asset.profile?.unit ? ` (${asset.profile.unit})` : '';
  const width = () => Math.max(280, container.clientWidth - 30);
  const plot = new window.uPlot(
    {
      width: width(),
      height: 220,
      scales: { x: { time: true } },
      series: [{}, { label: `${asset.name}${unit}`, stroke: '#0b5cad', width: 2, points: { show: xs.length < 200 } }],
      cursor: { drag: { x: true, y: false } },
    },
    [xs, ys],
    holder,
  );
  const onResize = () => plot.setSize({ width: width(), height: 220 });
  window.addEventListener('resize', onResize);
  return {
    add(at, value) {
      if (typeof value !== 'number') return;
      xs.push(new Date(at).getTime() / 1000);
      ys.push(value);
      holder.dataset.points = String(xs.length);
      plot.setData([xs, ys]);
    },
  };
}
