import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { crdFiles } from '../../api/v1alpha1/crd.js';
import { parseFlags } from '../args.js';
import type { Command } from '../command.js';

export const command: Command = {
  summary: 'print or write the CustomResourceDefinitions',
  usage: `Usage: tollgate crds [--out DIR]

Prints the CRDs of ModelRoute, Group and ApiKey (tollgate.dev/v1alpha1) as multi-document YAML,
or writes one file per CRD into DIR (DIR/<plural>.tollgate.dev.yaml).

  kubectl apply -f crds/            # or: tollgate crds | kubectl apply -f -`,
  async run(argv) {
    const { values } = parseFlags(argv, { out: { type: 'string' } });
    const files = crdFiles();
    if (!values.out) {
      process.stdout.write(files.map((f) => f.yaml).join('---\n'));
      return 0;
    }
    await mkdir(values.out, { recursive: true });
    for (const f of files) {
      await writeFile(join(values.out, f.file), f.yaml);
      console.error(`wrote ${join(values.out, f.file)}`);
    }
    return 0;
  },
};
