// What pi sends its model for each session file given: pi's own loader (SessionManager.open,
// buildSessionContext) and its message conversion (convertToLlm), from the installed package.
// Usage: node pi_context.mjs PACKAGE_DIR FILE... ; prints one JSON object per file.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, ...files] = process.argv.slice(2);
const pi = await import(pathToFileURL(join(packageDir, "dist", "index.js")).href);
const sessionDir = mkdtempSync(join(tmpdir(), "pi-context-"));
for (const file of files) {
	const manager = pi.SessionManager.open(file, sessionDir);
	const context = manager.buildSessionContext();
	const out = {
		file,
		sessionId: manager.getSessionId(),
		entries: manager.getEntries().length,
		model: context.model,
		thinkingLevel: context.thinkingLevel,
		messages: pi.convertToLlm(context.messages),
	};
	process.stdout.write(`${JSON.stringify(out)}\n`);
}
