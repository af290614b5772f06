// Judges rows under their JSON Schemas with ajv (draft 2020-12), as a node
// written in JavaScript would: reads [{"schema": PATH, "instance": ROW}, ...]
// on stdin, prints [true|false, ...]. AJV_DIR names where ajv is installed
// (.tools/ajv).
const fs = require("fs");
const path = require("path");
const Ajv2020 = require(path.resolve(process.env.AJV_DIR, "node_modules/ajv/dist/2020")).default;
const ajv = new Ajv2020({ allErrors: false });
const cases = JSON.parse(fs.readFileSync(0, "utf8"));
const compiled = {};
const out = cases.map((c) => {
  if (!compiled[c.schema]) {
    compiled[c.schema] = ajv.compile(JSON.parse(fs.readFileSync(c.schema, "utf8")));
  }
  return compiled[c.schema](c.instance) === true;
});
process.stdout.write(JSON.stringify(out));
