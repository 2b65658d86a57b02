import assert from "node:assert/strict";
import { RequestError } from "../control_link.ts";
import { WorkspaceFiles } from "./files.ts";

Deno.test("file routes on Windows: drive and UNC paths, / or \\, any case, checked against the roots", async () => {
  const files = new WorkspaceFiles({
    roots: ["C:\\Users\\Ada\\proj", "\\\\srv\\share"],
    home: "C:\\Users\\Ada",
    os: "windows",
  });
  const code = (path: string) =>
    files.resolve(path).then(() => "ok", (e) => e instanceof RequestError ? e.code : String(e));
  // Inside a root, however spelled (the file itself is on no disk of this Linux machine).
  assert.equal(await code("C:/Users/ada/PROJ/src/a.ts"), "path_not_found");
  assert.equal(await code("~\\proj\\a.ts"), "path_not_found");
  assert.equal(await code("\\\\SRV\\Share\\notes.md"), "path_not_found");
  // Outside: refused before anything is looked up.
  assert.equal(await code("C:\\Users\\Ada\\other\\a.ts"), "path_outside_roots");
  assert.equal(await code("C:\\Users\\Ada\\proj\\..\\other\\a.ts"), "path_outside_roots");
  assert.equal(await code("D:\\Users\\Ada\\proj\\a.ts"), "path_outside_roots");
  assert.equal(await code("\\\\srv\\sharex\\a.ts"), "path_outside_roots");
  assert.equal(await code("proj\\a.ts"), "bad_path");
});
