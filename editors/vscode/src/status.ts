import * as vscode from 'vscode';
import type { WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport } from 'vscode-languageclient/node';

/** Params of the daemon's `lookahead/completionStats` notification, sent after each completion. */
export interface CompletionStats {
  requestId: number | string;
  latencyMs: Partial<Record<'queue' | 'prompt' | 'prefill' | 'decode' | 'postprocess' | 'total', number>>;
  promptTokens?: number;
  prefilledTokens?: number;
  newTokens?: number;
  steps?: number;
  acceptedPerStep?: number;
  tokensPerSecond?: number;
  contextFiles?: string[];
}

/** The `model.choice` part of `lookahead.stats`: which model the `model` setting came to, and why. */
export interface ModelChoice {
  setting: string;
  model: string;
  size?: string | null;
  reason: string;
}

type Progress = WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd;

function fixed(value: number | undefined, digits: number): string {
  return value === undefined ? '?' : value.toFixed(digits);
}

/**
 * One status bar item: the daemon's state (starting, loading or indexing with progress), then the last
 * completion's speed. Clicking it runs `clickCommand` (show stats).
 */
export class StatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  private readonly titles = new Map<string | number, string>();
  private idleText = '$(sparkle) Lookahead';
  private idleTooltip = 'Lookahead: ready';
  private modelSize = '';  // ' 0.5B': the size of the embedded model in use, shown beside the name
  private modelLine = '';  // 'Model: ... (why)', the tooltip's first line

  constructor(clickCommand: string) {
    this.item.name = 'Lookahead';
    this.item.command = clickCommand;
    this.show();
    this.item.show();
  }

  starting(): void {
    this.setIdle('$(loading~spin) Lookahead: starting', 'Lookahead: starting the daemon');
  }

  stopped(reason: string): void {
    this.titles.clear();
    this.setIdle('$(error) Lookahead', `Lookahead: ${reason}`);
  }

  /** The model's state as `lookahead.stats` reports it: idle, loading, ready or failed; with its choice. */
  model(state: string, enabled: boolean, error?: string | null, choice?: ModelChoice | null): void {
    this.modelSize = choice?.size ? ` ${choice.size}` : '';
    this.modelLine = choice ? `Model: ${choice.model}${choice.size ? ` (${choice.size})` : ''}, ${
      choice.setting === 'auto' ? `chosen by "auto": ${choice.reason}` : choice.reason}.` : '';
    if (!enabled) {
      this.setIdle('$(circle-slash) Lookahead', 'Lookahead: completions off (Lookahead: Toggle Completions)');
    } else if (state === 'ready') {
      this.setIdle(`$(sparkle) Lookahead${this.modelSize}`, this.withModel('Lookahead: ready. Click for stats.'));
    } else if (state === 'failed') {
      this.setIdle('$(error) Lookahead', `Lookahead: the model failed to load: ${error ?? 'see the output'}`);
    } else {
      this.setIdle(`$(loading~spin) Lookahead: ${state}`, `Lookahead: model ${state}`);
    }
  }

  /** A `$/progress` value for a token the daemon created (model loading, indexing). */
  progress(token: string | number, value: Progress): void {
    if (value.kind === 'end') {
      this.titles.delete(token);
      this.show();
      return;
    }
    const title = value.kind === 'begin' ? value.title : this.titles.get(token) ?? 'Working';
    this.titles.set(token, title);
    const percent = value.percentage === undefined ? '' : ` ${Math.round(value.percentage)}%`;
    this.item.text = `$(loading~spin) ${title}${percent}`;
    this.item.tooltip = `Lookahead: ${title}${value.message ? `: ${value.message}` : ''}${percent}`;
  }

  completion(stats: CompletionStats): void {
    const ms = stats.latencyMs ?? {};
    this.idleText = `$(zap)${this.modelSize} ${fixed(stats.tokensPerSecond, 1)} tok/s · ${fixed(stats.acceptedPerStep, 2)}/step`;
    this.idleTooltip = [
      ...(this.modelLine ? [this.modelLine] : []),
      `Last completion: ${stats.newTokens ?? '?'} tokens in ${stats.steps ?? '?'} steps,`,
      `${fixed(stats.acceptedPerStep, 2)} accepted per step, ${fixed(stats.tokensPerSecond, 1)} tokens/s.`,
      `Latency ${fixed(ms.total, 0)} ms (queue ${fixed(ms.queue, 0)}, prompt ${fixed(ms.prompt, 0)},`,
      `prefill ${fixed(ms.prefill, 0)}, decode ${fixed(ms.decode, 0)}, postprocess ${fixed(ms.postprocess, 0)}).`,
      `Prompt ${stats.promptTokens ?? '?'} tokens, ${stats.prefilledTokens ?? '?'} prefilled.`,
      `Context: ${stats.contextFiles?.length ? stats.contextFiles.join(', ') : 'this file only'}. Click for stats.`,
    ].join('\n');
    this.show();
  }

  private withModel(tooltip: string): string {
    return this.modelLine ? `${tooltip}\n${this.modelLine}` : tooltip;
  }

  private setIdle(text: string, tooltip: string): void {
    this.idleText = text;
    this.idleTooltip = tooltip;
    this.show();
  }

  /** Shows the idle text unless a progress is running. */
  private show(): void {
    if (this.titles.size > 0) {
      return;
    }
    this.item.text = this.idleText;
    this.item.tooltip = this.idleTooltip;
  }

  dispose(): void {
    this.item.dispose();
  }
}
