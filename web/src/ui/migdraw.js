// One MIG GPU drawn as its memory slices: instances in place (profile, pool, workload), free
// slices marked open (an instance could still go there) or stranded (none can), and what still
// fits written under it, as the fleet row's `migRoom` says. The same facts follow as a list, for
// screen readers and for reading.
import { useEffect, useRef } from 'preact/hooks';
import { segments } from '../logic/mig.js';
import { html, useT } from './parts.js';
import { useDark } from './hooks.js';

const FILL_LIGHT = ['#cfe0fc', '#fde2c4', '#d3f1dc', '#ead9fb'];
const FILL_DARK = ['#1f3a66', '#5a3a12', '#1d4a2c', '#44275f'];

export function MigDrawing({ room, instances, uuid, width = 352 }) {
  const ref = useRef(null);
  const dark = useDark();
  const { t } = useT();
  const segs = segments(room, instances);
  const fits = room.fits;
  const slots = room.memorySlices;
  useEffect(() => {
    const c = ref.current;
    const w = width, hgt = 56, dpr = window.devicePixelRatio || 1;
    c.width = w * dpr;
    c.height = hgt * dpr;
    c.style.width = `${w}px`;
    c.style.height = `${hgt}px`;
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    const sw = w / slots;
    const ink = dark ? '#e8eaed' : '#1a1d21';
    ctx.font = '12px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    segs.forEach((s, k) => {
      const x = s.start * sw + 1, width = s.size * sw - 2, y = 1, ht = hgt - 2;
      if (s.state === 'used') {
        ctx.fillStyle = (dark ? FILL_DARK : FILL_LIGHT)[k % 4];
        ctx.fillRect(x, y, width, ht);
        ctx.strokeStyle = ink;
        ctx.lineWidth = s.instance.allocated ? 2 : 1;
        ctx.setLineDash([]);
        ctx.strokeRect(x, y, width, ht);
        ctx.fillStyle = ink;
        ctx.fillText(s.instance.profile, x + 4, hgt / 2 - 8, width - 8);
        const who = s.instance.pool || (s.instance.allocated ? t('mig.allocated') : t('mig.idle'));
        ctx.fillText(who, x + 4, hgt / 2 + 9, width - 8);
      } else if (s.state === 'open') {
        ctx.strokeStyle = ink;
        ctx.lineWidth = 1;
        ctx.setLineDash([4, 3]);
        ctx.strokeRect(x, y, width, ht);
        ctx.setLineDash([]);
        ctx.fillStyle = ink;
        ctx.fillText(t('mig.open'), x + 4, hgt / 2, width - 8);
      } else {
        ctx.save();
        ctx.beginPath();
        ctx.rect(x, y, width, ht);
        ctx.clip();
        ctx.strokeStyle = dark ? '#8a929e' : '#6b7280';
        for (let d = -ht; d < width; d += 8) {
          ctx.beginPath();
          ctx.moveTo(x + d, y + ht);
          ctx.lineTo(x + d + ht, y);
          ctx.stroke();
        }
        ctx.restore();
        ctx.strokeStyle = ink;
        ctx.strokeRect(x, y, width, ht);
      }
    });
  }, [JSON.stringify(segs.map((s) => [s.start, s.size, s.state, s.instance?.pool])), dark, t, width]);
  const range = (s) => (s.size === 1 ? t('mig.slice', { n: s.start }) : t('mig.slices', { from: s.start, to: s.start + s.size - 1 }));
  return html`<figure class="mig" data-testid="mig-drawing" data-gpu=${uuid}>
    <canvas ref=${ref} role="img" aria-label=${t('mig.label', { n: instances.length, slots })}
      data-segments=${segs.map((s) => `${s.start}:${s.size}:${s.state}${s.instance ? ':' + s.instance.profile : ''}`).join(' ')}></canvas>
    <figcaption>
      <p class="mig-fits">${fits.length ? t('mig.fits', { list: fits.map((f) => t('count.items', { n: f.count, thing: f.profile })).join(', ') }) : t('mig.full')}</p>
      <ul class="mig-list">
        ${segs.map((s) => html`<li data-start=${s.start} data-size=${s.size} data-state=${s.state} data-profile=${s.instance?.profile}>
          ${range(s)}: ${s.state === 'used'
            ? html`<strong>${s.instance.profile}</strong>${s.instance.pool ? ` · ${t('mig.pool', { pool: s.instance.pool })}` : ` · ${s.instance.allocated ? t('mig.allocated') : t('mig.idle')}`}${s.instance.workload ? ` · ${t('mig.workload', { workload: s.instance.workload })}` : ''}`
            : s.state === 'open' ? t('mig.openLong') : t('mig.strandedLong')}
        </li>`)}
      </ul>
    </figcaption>
  </figure>`;
}

// The instances of a GPU annotated with the pools and workloads the caller may see.
export function annotate(gpuUuid, instances, pools, profiles) {
  const lower = gpuUuid.toLowerCase();
  return instances.map((i) => {
    const out = { ...i };
    for (const p of pools) {
      for (const d of p.status?.allocation ?? []) {
        if (d.gpuUUID?.toLowerCase() === lower && ((d.instanceUUID && d.instanceUUID === i.uuid) || (!d.instanceUUID && d.start === i.start && d.profile === i.profile))) {
          out.pool = `${p.metadata.namespace}/${p.metadata.name}`;
        }
      }
    }
    for (const w of profiles) {
      if (w.spec?.end) continue;
      if ((w.spec?.devices ?? []).some((d) => d.instanceUUID && d.instanceUUID === i.uuid)) out.workload = w.spec.pod;
    }
    return out;
  });
}
