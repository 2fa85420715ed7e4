// The server's OpenAPI documents, checked by tools that did not write them: swagger-parser
// validates /openapi/v2 and /openapi/v3 against the OpenAPI 2.0 and 3.0 specifications, and ajv
// validates every object the server holds, of every kind, against that kind's schema, read as a
// structural schema (a member the schema does not name is an error, as kube-apiserver would
// prune it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv from 'ajv';
import { startServer, createProject, createPool, TOKENS, waitFor } from '../browser/harness.mjs';

// A kind's schema with its $refs inlined and every object closed to members it does not name.
function structural(schema, components) {
  if (Array.isArray(schema)) return schema.map((s) => structural(s, components));
  if (schema === null || typeof schema !== 'object') return schema;
  if (schema.$ref) return structural(components[schema.$ref.split('/').pop()], components);
  const out = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k.startsWith('x-')) continue;
    out[k] = k === 'enum' || k === 'required' ? v : structural(v, components);
  }
  if (schema.type === 'object' && !schema['x-kubernetes-preserve-unknown-fields'] && !schema.additionalProperties) {
    out.additionalProperties = false;
  }
  return out;
}

test('the OpenAPI documents are valid and every stored object fits its kind\'s schema', async () => {
  const server = await startServer(['--demo']);
  try {
    // Objects of the kinds users write, beside the demo fleet's.
    await createProject(server, 'schema');
    await createPool(server, 'schema', 'train', [{ model: 'H200-SXM-141GB', profile: 'full', count: 1 },
      { model: 'H200-SXM-141GB', profile: '7g.141gb', count: 1 }]);
    await server.api('/apis/gpuaas.io/v1/namespaces/schema/gpupools/train/approval', {
      method: 'PUT', body: { approve: true, reason: 'schema test' },
    });
    await waitFor(async () => {
      const p = await server.api('/apis/gpuaas.io/v1/namespaces/schema/gpupools/train');
      return p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    }, 60000, 'the pool to be Ready');
    await server.api('/apis/gpuaas.io/v1/namespaces/schema/workloads', {
      method: 'POST',
      body: { apiVersion: 'gpuaas.io/v1', kind: 'Workload', metadata: { name: 'job' },
        spec: { pool: 'train', resources: { 'nvidia.com/gpu': 1 } } },
    });
    const month = new Date();
    await server.api('/apis/gpuaas.io/v1/ratecards', {
      method: 'POST',
      body: { apiVersion: 'gpuaas.io/v1', kind: 'RateCard', metadata: { name: 'list' },
        spec: { currency: 'USD', effectiveFrom: `${month.toISOString().slice(0, 7)}-01T00:00:00Z`,
          prices: [{ model: 'H200-SXM-141GB', profile: 'full', pricePerHourMicros: 4000000 }] } },
    });
    // A label set with kubectl's merge patch: managedFields too must fit.
    const res = await server.api('/apis/gpuaas.io/v1/namespaces/schema/gpupools/train?fieldManager=kubectl-label', {
      method: 'PATCH', raw: true,
    });
    assert.equal(res.status, 415, 'a PATCH without a patch media type is refused');
    const labelled = await fetch(`${server.url}/apis/gpuaas.io/v1/namespaces/schema/gpupools/train?fieldManager=kubectl-label`, {
      method: 'PATCH',
      headers: { Authorization: `Bearer ${TOKENS.operator}`, 'Content-Type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels: { team: 'vision' } } }),
    });
    assert.equal(labelled.status, 200, await labelled.text());

    const v3 = await server.api('/openapi/v3/apis/gpuaas.io/v1');
    const v2 = await server.api('/openapi/v2');
    const index = await server.api('/openapi/v3');
    assert.ok(index.paths['apis/gpuaas.io/v1'].serverRelativeURL.startsWith('/openapi/v3/apis/gpuaas.io/v1?hash='));
    // The validators change what they are given: each gets its own copy.
    await SwaggerParser.validate(structuredClone(v3));
    await SwaggerParser.validate(structuredClone(v2));

    const discovery = await server.api('/apis/gpuaas.io/v1');
    const components = v3.components.schemas;
    const ajv = new Ajv({ allErrors: true, strict: false });
    ajv.addFormat('date-time', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/);
    ajv.addFormat('int64', true);
    const checked = {};
    for (const r of discovery.resources) {
      const schema = components[`io.gpuaas.v1.${r.kind}`];
      assert.ok(schema, `a schema for ${r.kind}`);
      assert.deepEqual(schema['x-kubernetes-group-version-kind'], [{ group: 'gpuaas.io', kind: r.kind, version: 'v1' }]);
      const validate = ajv.compile(structural(schema, components));
      const list = await server.api(`/apis/gpuaas.io/v1/${r.name}`);
      for (const obj of list.items) {
        assert.ok(validate(obj), `${r.kind} ${obj.metadata?.name}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(obj)}`);
      }
      checked[r.kind] = list.items.length;
    }
    for (const kind of ['Cluster', 'NodeCapacity', 'GpuCapacity', 'SpecAndCount', 'Project', 'GpuPool', 'MigLayout',
      'Workload', 'Profile', 'RateCard', 'UsageRecord']) {
      assert.ok(checked[kind] > 0, `objects of ${kind} were checked (${JSON.stringify(checked)})`);
    }
    // Every PATCH lists fieldValidation (kubectl then validates on the server) and carries its kind.
    for (const [path, item] of Object.entries(v3.paths)) {
      if (!item.patch) continue;
      assert.ok(item.patch.parameters.some((p) => p.name === 'fieldValidation' && p.in === 'query'), path);
      assert.ok(item.patch['x-kubernetes-group-version-kind'], path);
      assert.ok(!('application/strategic-merge-patch+json' in item.patch.requestBody.content), path);
    }
  } finally {
    await server.stop();
  }
});
