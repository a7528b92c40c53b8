import * as vscode from 'vscode';
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  State,
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
  type LanguageClientOptions,
  type ServerOptions,
} from 'vscode-languageclient/node';
import {
  SECTION, completionsEnabled, daemonSettings, resolveServerCommand, setCompletionsEnabled,
} from './settings';
import { StatusBar, type CompletionStats, type ModelChoice } from './status';

/** `lookahead/completionReady`: the daemon holds more of the completion at this document state. */
interface CompletionReady {
  uri: string;
  version: number | null;
  position: { line: number; character: number };
}

/** The `model` part of the daemon's `lookahead.stats` answer. */
interface ModelInfo {
  state: string;
  error?: string | null;
  choice?: ModelChoice | null;
}

/**
 * The daemon behind one LanguageClient. Inline completions themselves need no code here: the LanguageClient
 * registers an InlineCompletionItemProvider when the daemon advertises `inlineCompletionProvider`. The items
 * are plain text with ranges, so VS Code's partial accept works on them (accept word, accept line).
 * Progressive ghost text: on `lookahead/completionReady` the suggestion is asked for again (the daemon answers
 * from what it holds), only while the editor is still at that document version and cursor.
 */
class Daemon implements vscode.Disposable {
  private client: LanguageClient | undefined;

  constructor(private readonly output: vscode.LogOutputChannel, private readonly status: StatusBar) {}

  async start(): Promise<void> {
    const { command, args } = resolveServerCommand();
    this.output.info(`Starting ${command} ${args.join(' ')}`);
    this.status.starting();
    const serverOptions: ServerOptions = { command, args };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
      initializationOptions: daemonSettings(),
      outputChannel: this.output,
      middleware: {
        provideInlineCompletionItems: (document, position, context, token, next) =>
          completionsEnabled() ? next(document, position, context, token) : undefined,
      },
    };
    const client = new LanguageClient(SECTION, 'Lookahead', serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState(({ newState }) => {
      if (newState === State.Stopped && this.client === client) {
        this.status.stopped('the daemon is not running (Lookahead: Restart Server)');
      }
    });
    try {
      await client.start();
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.status.stopped(`could not start ${command}: ${reason}`);
      void vscode.window.showErrorMessage(
        `Lookahead: could not start ${command} (${reason}). Set lookahead.server.command or lookahead.server.projectPath.`);
      return;
    }
    client.onNotification('lookahead/completionStats', (stats: CompletionStats) => this.status.completion(stats));
    client.onNotification('lookahead/completionReady', (ready: CompletionReady) => retrigger(ready));
    // Replaces the client's own progress UI so that model loading and indexing show in our status item.
    client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => {
      const listener = client.onProgress(WorkDoneProgress.type, token, (value) => {
        this.status.progress(token, value);
        if (value.kind === 'end') {
          listener.dispose();
          void this.refreshModelState();
        }
      });
    });
    console.log('lookahead: client started');
    await this.refreshModelState();
  }

  /** Asks the daemon for its model's state (after start, after each progress) and shows it. */
  async refreshModelState(): Promise<void> {
    if (!this.client?.isRunning()) {
      return;
    }
    const stats = (await this.execute('lookahead.stats'))?.result as { model?: ModelInfo } | undefined;
    const model = stats?.model ?? { state: 'unknown' };
    this.status.model(model.state, completionsEnabled(), model.error, model.choice);
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client?.isRunning()) {
      await client.stop();
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Runs one of the daemon's workspace/executeCommand commands; undefined when the daemon is not running. */
  async execute(command: string): Promise<{ result: unknown } | undefined> {
    if (!this.client?.isRunning()) {
      void vscode.window.showWarningMessage('Lookahead: the daemon is not running (Lookahead: Restart Server).');
      return undefined;
    }
    return { result: await this.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [] }) };
  }

  async onConfigurationChanged(event: vscode.ConfigurationChangeEvent): Promise<void> {
    if (event.affectsConfiguration(`${SECTION}.server`)) {
      await this.restart();
    } else if (event.affectsConfiguration(SECTION)) {
      await this.client?.sendNotification(DidChangeConfigurationNotification.type, {
        settings: { [SECTION]: daemonSettings() },
      });
      await this.refreshModelState();
    }
  }

  dispose(): void {
    void this.stop();
  }
}

/** Asks for the inline suggestion again when the active editor is still where the daemon's completion is. */
function retrigger(ready: CompletionReady): void {
  const editor = vscode.window.activeTextEditor;
  if (!editor || !completionsEnabled() || editor.document.uri.toString() !== vscode.Uri.parse(ready.uri).toString()) {
    return;
  }
  const cursor = editor.selection.active;
  const here = editor.selection.isEmpty && cursor.line === ready.position.line
    && cursor.character === ready.position.character;
  if (here && (ready.version === null || editor.document.version === ready.version)) {
    void vscode.commands.executeCommand('editor.action.inlineSuggest.trigger');
  }
}

let daemon: Daemon | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('Lookahead', { log: true });
  const status = new StatusBar('lookahead.showStats');
  daemon = new Daemon(output, status);
  const d = daemon;
  context.subscriptions.push(
    output,
    status,
    d,
    vscode.commands.registerCommand('lookahead.restartServer', () => d.restart()),
    vscode.commands.registerCommand('lookahead.toggleCompletions', () => setCompletionsEnabled(!completionsEnabled())),
    vscode.commands.registerCommand('lookahead.showStats', async () => {
      const stats = await d.execute('lookahead.stats');
      if (stats) {
        const doc = await vscode.workspace.openTextDocument({
          language: 'json', content: JSON.stringify(stats.result, null, 2),
        });
        await vscode.window.showTextDocument(doc, { preview: true });
      }
    }),
    vscode.commands.registerCommand('lookahead.reindexWorkspace', async () => {
      if (await d.execute('lookahead.reindex')) {
        void vscode.window.showInformationMessage('Lookahead: reindexing the workspace.');
      }
    }),
    vscode.workspace.onDidChangeConfiguration((event) => d.onConfigurationChanged(event)),
  );
  await d.start();
}

export async function deactivate(): Promise<void> {
  await daemon?.stop();
}
