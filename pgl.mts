import { PGlite } from '@electric-sql/pglite';
let t = Date.now();
const a = new PGlite(); await a.query('select 1'); console.log('first', Date.now() - t);
t = Date.now();
const b = new PGlite(); await b.query('select 1'); console.log('second', Date.now() - t);
t = Date.now();
const dump = await b.dumpDataDir('none'); console.log('dump', Date.now() - t, dump.size);
t = Date.now();
const c = new PGlite({ loadDataDir: dump }); await c.query('select 1'); console.log('load', Date.now() - t);
