-- lookahead-lsp for Neovim: inline ("ghost text") completions from the lookahead-lsp daemon.
--
--   require('lookahead').setup({ settings = { model = 'auto' } })
--
-- On Neovim 0.12+ the ghost text is Neovim's own (vim.lsp.inline_completion); on 0.10/0.11 it is this
-- plugin's fallback (lua/lookahead/ghost.lua). Either way one key accepts it (<Tab> by default), others accept
-- its next word (<M-Right>) or line (<M-C-Right>); each falls through to its usual meaning when there is
-- nothing to accept. Progressive ghost text: on lookahead/completionReady (the daemon holds more of the
-- completion at this buffer version and cursor) the completion is asked for again, so it grows by itself.
local util = require('lookahead.util')

local M = {}

M.name = 'lookahead'

local defaults = {
  cmd = nil, -- the daemon command, a list; nil: found by resolve_cmd()
  project_path = nil, -- a lookahead-lsp checkout whose .venv/bin/lookahead-lsp to run
  filetypes = nil, -- nil: every filetype
  root_markers = { '.git' },
  settings = {}, -- the daemon's settings: model, device, dtype, maxNewTokens, ... (see README)
  accept_key = '<Tab>', -- false: map nothing, call require('lookahead').accept() yourself
  accept_word_key = '<M-Right>', -- false: map nothing; require('lookahead').accept_part('word')
  accept_line_key = '<M-C-Right>', -- false: map nothing; require('lookahead').accept_part('line')
  native = nil, -- nil: Neovim's inline completion where there is one (0.12+); false: always the fallback
  debounce_ms = 150, -- fallback only: quiet time after typing before a request
  hl_group = 'Comment', -- fallback only: the ghost text's highlight
}

--- The options in use, after setup().
M.config = nil

local function executable_in(dir)
  for _, rel in ipairs({ '.venv/bin/lookahead-lsp', 'bin/lookahead-lsp' }) do
    local path = vim.fs.joinpath(dir, rel)
    if vim.fn.executable(path) == 1 then
      return path
    end
  end
end

--- The daemon command: `cmd` when given, else `.venv/bin/lookahead-lsp` under `project_path` or the working
--- directory, else `lookahead-lsp` from PATH.
function M.resolve_cmd(config)
  config = config or M.config or defaults
  if config.cmd then
    return config.cmd
  end
  local exe = (config.project_path and executable_in(vim.fs.normalize(config.project_path)))
    or executable_in(vim.fn.getcwd())
    or 'lookahead-lsp'
  return { exe, 'serve' }
end

--- True when Neovim's own inline completion shows the ghost text.
function M.is_native()
  local config = M.config or defaults
  return config.native ~= false and vim.lsp.inline_completion ~= nil
end

--- The running daemon client (of the current buffer when it has one).
function M.client(bufnr)
  return vim.lsp.get_clients({ name = M.name, bufnr = bufnr })[1] or vim.lsp.get_clients({ name = M.name })[1]
end

local function as_dict(t)
  return next(t) and t or vim.empty_dict() -- an empty Lua table would be sent as a JSON list
end

local function enabled()
  return M.config.settings.enabled ~= false
end

--- Accepts the ghost text at the cursor; false when there is none.
function M.accept()
  if M.is_native() then
    return vim.lsp.inline_completion.get()
  end
  return require('lookahead.ghost').accept()
end

--- Accepts the next word ('word') or the rest of the line ('line') of the ghost text; false when there is none.
function M.accept_part(kind)
  if not M.is_native() then
    return require('lookahead.ghost').accept_part(kind)
  end
  return vim.lsp.inline_completion.get({
    on_accept = function(item)
      local text = type(item.insert_text) == 'string' and item.insert_text or item.insert_text.value
      local row, col = unpack(vim.api.nvim_win_get_cursor(0))
      row = row - 1
      if item.range then -- skip what was typed since the item's start
        local start_row, start_col = item.range:to_extmark()
        local line = vim.api.nvim_buf_get_lines(0, row, row + 1, false)[1] or ''
        local typed = start_row == row and line:sub(start_col + 1, col) or ''
        text = vim.startswith(text, typed) and text:sub(#typed + 1) or text
      end
      util.insert_at(0, row, col, util.next_part(text, kind))
      return nil -- inserted here: Neovim applies nothing
    end,
  })
end

-- Progressive ghost text: the daemon holds more of the completion shown at (uri, version, position). Asks
-- again when the current buffer is still there in insert mode (the daemon answers from what it holds).
local function on_ready(_, params, ctx)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client or not params or vim.uri_from_bufnr(bufnr) ~= params.uri then
    return
  end
  if not vim.startswith(vim.api.nvim_get_mode().mode, 'i') or vim.lsp.util.buf_versions[bufnr] ~= params.version then
    return
  end
  local position = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  if position.line ~= params.position.line or position.character ~= params.position.character then
    return
  end
  if M.is_native() then
    -- vim.lsp.inline_completion asks again on its own events; it has no public "request now"
    vim.api.nvim_exec_autocmds('CursorMovedI', { buffer = bufnr, modeline = false })
  else
    require('lookahead.ghost').refresh(bufnr)
  end
end

-- The keys to send when there is nothing to accept: an earlier mapping of the key, or the key itself.
local function fall_through(previous, key)
  if previous.callback then
    if previous.expr == 1 then
      return previous.callback()
    end
    vim.schedule(previous.callback)
    return ''
  end
  if previous.rhs then
    return previous.expr == 1 and vim.api.nvim_eval(previous.rhs) or previous.rhs
  end
  return key
end

local function map_accept(key, accept, what)
  local previous = vim.fn.maparg(key, 'i', false, true)
  vim.keymap.set('i', key, function()
    return accept() and '' or fall_through(previous, key)
  end, { expr = true, desc = 'lookahead: accept ' .. what })
end

local function set_native(client_id, on)
  vim.lsp.inline_completion.enable(on, { client_id = client_id })
end

local function on_attach(client, bufnr)
  if M.is_native() then
    set_native(client.id, enabled())
  else
    require('lookahead.ghost').attach(bufnr, client)
  end
end

--- Runs one of the daemon's commands (lookahead.stats, lookahead.reindex); `callback(err, result)`.
function M.execute(command, callback)
  local client = M.client()
  if not client then
    callback({ message = 'the lookahead-lsp daemon is not running' }, nil)
    return
  end
  util.call(client, 'request', 'workspace/executeCommand', { command = command, arguments = {} }, callback)
end

--- The daemon's lookahead.stats answer, waiting at most `timeout_ms`; nil and a reason when there is none.
function M.stats_sync(timeout_ms)
  local client = M.client()
  if not client then
    return nil, 'the lookahead-lsp daemon is not running'
  end
  local params = { command = 'lookahead.stats', arguments = {} }
  local answer, err = util.call(client, 'request_sync', 'workspace/executeCommand', params, timeout_ms or 5000)
  if not answer or answer.err then
    return nil, vim.inspect(err or answer.err)
  end
  return answer.result
end

--- Changes daemon settings live (workspace/didChangeConfiguration, section "lookahead").
function M.update_settings(changes)
  M.config.settings = vim.tbl_extend('force', M.config.settings, changes)
  for _, client in ipairs(vim.lsp.get_clients({ name = M.name })) do
    client.settings = { lookahead = as_dict(M.config.settings) } -- also what workspace/configuration answers
    util.call(client, 'notify', 'workspace/didChangeConfiguration', { settings = client.settings })
    if M.is_native() then
      set_native(client.id, enabled())
    end
  end
  if not enabled() and not M.is_native() then
    require('lookahead.ghost').clear_all()
  end
end

function M.toggle()
  M.update_settings({ enabled = not enabled() })
  vim.notify('lookahead: completions ' .. (enabled() and 'on' or 'off'))
end

local function notify_result(what)
  return function(err, result)
    if err then
      vim.notify('lookahead: ' .. what .. ' failed: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    else
      vim.notify('lookahead ' .. what .. ': ' .. vim.inspect(result))
    end
  end
end

local function create_commands()
  local commands = {
    LookaheadStats = function()
      M.execute('lookahead.stats', notify_result('stats'))
    end,
    LookaheadReindex = function()
      M.execute('lookahead.reindex', notify_result('reindex'))
    end,
    LookaheadToggle = M.toggle,
  }
  for name, fn in pairs(commands) do
    vim.api.nvim_create_user_command(name, fn, {})
  end
end

local function register(config)
  local client_config = {
    cmd = M.resolve_cmd(config),
    filetypes = config.filetypes,
    root_markers = config.root_markers,
    init_options = as_dict(config.settings),
    settings = { lookahead = as_dict(config.settings) },
    handlers = { ['lookahead/completionReady'] = on_ready },
  }
  if vim.lsp.config then -- 0.11+
    vim.lsp.config(M.name, client_config)
    vim.lsp.enable(M.name)
    return
  end
  vim.api.nvim_create_autocmd('FileType', { -- 0.10
    group = vim.api.nvim_create_augroup('lookahead.start', { clear = true }),
    pattern = config.filetypes or '*',
    callback = function(args)
      if vim.bo[args.buf].buftype == '' then
        local start = vim.tbl_extend('force', client_config, {
          name = M.name,
          root_dir = vim.fs.root(args.buf, config.root_markers),
        })
        vim.lsp.start(start, { bufnr = args.buf })
      end
    end,
  })
end

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  register(M.config)
  vim.api.nvim_create_autocmd('LspAttach', {
    group = vim.api.nvim_create_augroup('lookahead.attach', { clear = true }),
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if client and client.name == M.name then
        on_attach(client, args.buf)
      end
    end,
  })
  if M.config.accept_key then
    map_accept(M.config.accept_key, M.accept, 'the inline completion')
  end
  if M.config.accept_word_key then
    map_accept(M.config.accept_word_key, function() return M.accept_part('word') end, 'its next word')
  end
  if M.config.accept_line_key then
    map_accept(M.config.accept_line_key, function() return M.accept_part('line') end, 'the rest of its line')
  end
  create_commands()
end

return M
