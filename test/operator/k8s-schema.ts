import * as client from '@kubernetes/client-node';
import { HTTPRoute } from '@kubernetes-models/gateway-api/gateway.networking.k8s.io/v1';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ConfigMap, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';

/**
 * A kubeconform-style check of rendered manifests, offline: kubernetes-models validates each
 * object against the OpenAPI schema of its kind (types, required fields, enums, formats), and
 * the type maps of @kubernetes/client-node (generated from the same OpenAPI) reject fields the
 * kind does not have, as `kubectl apply --validate=strict` would.
 */

type Obj = Record<string, any>;
interface Validatable {
  validate(): void;
}

const KINDS: Record<string, { model: new (o: any) => Validatable; strict?: string }> = {
  'apiextensions.k8s.io/v1/CustomResourceDefinition': { model: CustomResourceDefinition, strict: 'V1CustomResourceDefinition' },
  'apps/v1/Deployment': { model: Deployment, strict: 'V1Deployment' },
  'autoscaling/v2/HorizontalPodAutoscaler': { model: HorizontalPodAutoscaler, strict: 'V2HorizontalPodAutoscaler' },
  'networking.k8s.io/v1/Ingress': { model: Ingress, strict: 'V1Ingress' },
  'networking.k8s.io/v1/NetworkPolicy': { model: NetworkPolicy, strict: 'V1NetworkPolicy' },
  'policy/v1/PodDisruptionBudget': { model: PodDisruptionBudget, strict: 'V1PodDisruptionBudget' },
  'rbac.authorization.k8s.io/v1/Role': { model: Role, strict: 'V1Role' },
  'rbac.authorization.k8s.io/v1/RoleBinding': { model: RoleBinding, strict: 'V1RoleBinding' },
  'v1/ConfigMap': { model: ConfigMap, strict: 'V1ConfigMap' },
  'v1/Secret': { model: Secret, strict: 'V1Secret' },
  'v1/Service': { model: Service, strict: 'V1Service' },
  'v1/ServiceAccount': { model: ServiceAccount, strict: 'V1ServiceAccount' },
  'gateway.networking.k8s.io/v1/HTTPRoute': { model: HTTPRoute },
};

/** Kinds of other projects' CRDs (the Prometheus Operator's, CloudNativePG's): only their shape is checked. */
const FOREIGN = new Set([
  'postgresql.cnpg.io/v1/Cluster',
  'monitoring.coreos.com/v1/ServiceMonitor',
  'monitoring.coreos.com/v1/PodMonitor',
  'monitoring.coreos.com/v1/PrometheusRule',
]);

type AttributeMap = { name: string; baseName: string; type: string }[];
const models = client as unknown as Record<string, { getAttributeTypeMap?: () => AttributeMap } | undefined>;

/** Fields the kind does not define, as paths. */
export function unknownFields(value: unknown, type: string, path = ''): string[] {
  if (value === null || value === undefined) return [];
  const array = /^Array<(.+)>$/.exec(type);
  if (array) return Array.isArray(value) ? value.flatMap((v, i) => unknownFields(v, array[1]!, `${path}[${i}]`)) : [];
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) return typeof value === 'object' ? Object.entries(value).flatMap(([k, v]) => unknownFields(v, map[1]!, `${path}.${k}`)) : [];
  const attrs = models[type]?.getAttributeTypeMap?.();
  if (!attrs || typeof value !== 'object' || Array.isArray(value)) return [];
  const out: string[] = [];
  for (const [k, v] of Object.entries(value as Obj)) {
    const attr = attrs.find((a) => a.baseName === k);
    if (!attr) out.push(`${path}.${k}`);
    else out.push(...unknownFields(v, attr.type, `${path}.${k}`));
  }
  return out;
}

/** What is wrong with one manifest: empty when it is valid for its kind. */
export function manifestErrors(obj: Obj): string[] {
  const id = `${obj.apiVersion}/${obj.kind}`;
  const where = `${obj.kind}/${obj.metadata?.name}`;
  if (typeof obj.metadata?.name !== 'string' || !obj.metadata.name) return [`${id}: metadata.name is required`];
  if (FOREIGN.has(id)) return obj.spec && typeof obj.spec === 'object' ? [] : [`${where}: spec is required`];
  const kind = KINDS[id];
  if (!kind) return [`${where}: no schema for ${id}`];
  const errors: string[] = [];
  try {
    new kind.model(obj).validate();
  } catch (err) {
    errors.push(`${where}: ${(err as Error).message}`);
  }
  if (kind.strict) errors.push(...unknownFields(obj, kind.strict).map((p) => `${where}: unknown field ${p.slice(1)}`));
  return errors;
}
