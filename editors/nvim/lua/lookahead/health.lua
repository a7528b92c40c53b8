-- :checkhealth lookahead — the daemon command, the model's state, and which ghost-text path is in use.
local M = {}

local health = vim.health

local function check_command(lookahead)
  local cmd = lookahead.resolve_cmd()
  local exe = vim.fn.exepath(cmd[1])
  if exe == '' then
    health.error(
      ('daemon command not found: %s'):format(table.concat(cmd, ' ')),
      { 'pip install lookahead-lsp, or pass cmd = {...} or project_path = ... to setup()' }
    )
  else
    health.ok(('daemon command: %s (executable: %s)'):format(table.concat(cmd, ' '), exe))
  end
end

-- One line per field of the daemon's lookahead.stats answer about the model.
local function describe(value)
  if type(value) ~= 'table' then
    return tostring(value)
  end
  local parts = {}
  for key, v in pairs(value) do
    if type(v) ~= 'table' then
      parts[#parts + 1] = ('%s=%s'):format(key, tostring(v))
    end
  end
  table.sort(parts)
  return table.concat(parts, ', ')
end

local function check_model(lookahead)
  local client = lookahead.client()
  if not client then
    health.info('the daemon is not running in this Neovim (it starts when a matching file is opened)')
    return
  end
  local stats, err = lookahead.stats_sync(5000)
  if not stats then
    health.warn(('daemon running (client %d) but lookahead.stats failed: %s'):format(client.id, err))
    return
  end
  health.ok(('daemon running (client %d), model: %s'):format(client.id, describe(stats.model or stats)))
  local choice = stats.model and stats.model.choice
  if type(choice) == 'table' then
    local size = choice.size ~= vim.NIL and choice.size or '?' -- JSON null: a model that is not embedded
    health.info(('model %s (%s): %s'):format(tostring(choice.model), tostring(size), tostring(choice.reason)))
  end
end

function M.check()
  health.start('lookahead')
  local lookahead = require('lookahead')
  if not lookahead.config then
    health.error("setup() was not called", { "add require('lookahead').setup({}) to your config" })
    return
  end
  check_command(lookahead)
  check_model(lookahead)
  if lookahead.is_native() then
    health.ok('ghost text: native vim.lsp.inline_completion (Neovim 0.12+)')
  else
    health.ok(('ghost text: fallback (extmarks in namespace lookahead.ghost; Neovim %s)'):format(
      tostring(vim.version())))
  end
  local key = lookahead.config.accept_key
  health.info(key and ('accept key: %s'):format(key) or 'accept key: none (call require("lookahead").accept())')
end

return M
