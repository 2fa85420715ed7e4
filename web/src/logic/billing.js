// Sums over an invoice's lines for the billing page. Framework-free.

// {used}: used GPU-hours over the lines that have readings (null when none has).
export function invoiceTotals(invoice) {
  let used = null;
  for (const l of invoice.lines ?? []) {
    if (typeof l.usedGpuHours === 'number') used = (used ?? 0) + l.usedGpuHours;
  }
  return { used };
}
