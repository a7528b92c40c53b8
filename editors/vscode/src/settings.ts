import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';

/** The configuration section shared with the daemon (initializationOptions and workspace/didChangeConfiguration). */
export const SECTION = 'lookahead';

/** The daemon's own keys; everything else under `lookahead.` (server.*) configures this extension only. */
const DAEMON_KEYS = [
  'enabled', 'model', 'device', 'dtype', 'prefillDtype', 'weights', 'decoder', 'remote', 'window', 'ngram', 'verify',
  'draftLength', 'threads', 'maxNewTokens', 'kvSlots', 'tokenBudget', 'idleTokenBudget',
  'promptLayout', 'blockEnd', 'backgroundPrefill',
  'lineDeadlineMs', 'multilineDeadlineMs', 'lineCapMs', 'progressive', 'indexEnabled', 'definitions', 'include',
  'exclude', 'logFile',
] as const;

function config(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(SECTION);
}

/**
 * Every daemon setting as the user has it (defaults included: the daemon applies changes on top of what it has,
 * so a setting put back to its default must be sent too). An empty string means null, the daemon's "none".
 */
export function daemonSettings(): Record<string, unknown> {
  const cfg = config();
  const settings: Record<string, unknown> = {};
  for (const key of DAEMON_KEYS) {
    const value = cfg.get<unknown>(key);
    settings[key] = value === '' || value === undefined ? null : value;
  }
  return settings;
}

export function completionsEnabled(): boolean {
  return config().get<boolean>('enabled', true);
}

export async function setCompletionsEnabled(enabled: boolean): Promise<void> {
  await config().update('enabled', enabled, vscode.ConfigurationTarget.Global);
}

export interface ServerCommand {
  command: string;
  args: string[];
}

const EXECUTABLE = process.platform === 'win32' ? 'lookahead-lsp.exe' : 'lookahead-lsp';
const SCRIPTS = process.platform === 'win32' ? 'Scripts' : 'bin';

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The daemon to start: `lookahead.server.command` when set (relative to the first workspace folder), else
 * `.venv/bin/lookahead-lsp` (or `bin/lookahead-lsp` of a virtual environment) under `lookahead.server.projectPath`
 * or under a workspace folder, else `lookahead-lsp` from PATH.
 */
export function resolveServerCommand(): ServerCommand {
  const cfg = config();
  const args = cfg.get<string[]>('server.args', ['serve']);
  const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
  const explicit = cfg.get<string>('server.command', '');
  if (explicit) {
    const command = path.isAbsolute(explicit) || folders.length === 0 || !explicit.includes(path.sep)
      ? explicit
      : path.join(folders[0], explicit);
    return { command, args };
  }
  const projectPath = cfg.get<string>('server.projectPath', '');
  const roots = projectPath ? [projectPath, ...folders] : folders;
  for (const root of roots) {
    for (const candidate of [path.join(root, '.venv', SCRIPTS, EXECUTABLE), path.join(root, SCRIPTS, EXECUTABLE)]) {
      if (isExecutable(candidate)) {
        return { command: candidate, args };
      }
    }
  }
  return { command: 'lookahead-lsp', args };
}
