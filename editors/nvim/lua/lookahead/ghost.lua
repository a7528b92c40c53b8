-- Ghost text for Neovim without vim.lsp.inline_completion (0.10, 0.11): textDocument/inlineCompletion after
-- typing or moving in insert mode (debounced), shown as extmarks at the cursor, cleared when the cursor moves
-- or insert mode ends, accepted by require('lookahead').accept() (whole) or accept_part() (a word, a line).
-- refresh() asks again at once (the daemon announced more of the completion: progressive ghost text).
local util = require('lookahead.util')
local api = vim.api

local M = {}

M.ns = api.nvim_create_namespace('lookahead.ghost')

local TRIGGER_AUTOMATIC = 2 -- lsp.InlineCompletionTriggerKind.Automatic

--- Per buffer: { client_id, timer, generation, request_id?, shown? = { row, col, end_col, tick, lines, item } }
local buffers = {}

local function config()
  return require('lookahead').config
end

local function cursor()
  local pos = api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

local function in_insert_mode()
  return vim.startswith(api.nvim_get_mode().mode, 'i')
end

-- True while the buffer and the cursor are where they were at `tick`, `row`, `col`.
local function unchanged(bufnr, tick, row, col)
  if api.nvim_get_current_buf() ~= bufnr or api.nvim_buf_get_changedtick(bufnr) ~= tick then
    return false
  end
  local r, c = cursor()
  return r == row and c == col
end

local function clear(bufnr)
  local state = buffers[bufnr]
  if not state then
    return
  end
  state.timer:stop()
  state.generation = state.generation + 1 -- answers to earlier requests are dropped
  local client = vim.lsp.get_client_by_id(state.client_id)
  if state.request_id and client then
    util.call(client, 'cancel_request', state.request_id)
  end
  state.request_id, state.shown = nil, nil
  api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
end

function M.clear_all()
  for bufnr in pairs(buffers) do
    clear(bufnr)
  end
end

-- What `item` would still add at the cursor, as lines, and the byte column its range ends at on the cursor's
-- row; nil when the item does not continue the text before the cursor.
local function remaining(bufnr, item, encoding, row, col)
  local text = type(item.insertText) == 'string' and item.insertText or item.insertText.value
  local range = item.range
  if not range then
    return vim.split(text, '\n', { plain = true }), col
  end
  if range.start.line ~= row then
    return nil
  end
  local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1]
  local typed = line:sub(util.byte_col(line, range.start.character, encoding) + 1, col)
  if text:sub(1, #typed) ~= typed then
    return nil
  end
  local end_col = range['end'].line == row and util.byte_col(line, range['end'].character, encoding) or col
  return vim.split(text:sub(#typed + 1), '\n', { plain = true }), math.max(end_col, col)
end

local function show(bufnr, shown)
  api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1) -- a refreshed answer replaces the one shown
  local hl = config().hl_group
  local virt_lines = {}
  for i = 2, #shown.lines do
    virt_lines[#virt_lines + 1] = { { shown.lines[i], hl } }
  end
  api.nvim_buf_set_extmark(bufnr, M.ns, shown.row, shown.col, {
    virt_text = { { shown.lines[1], hl } },
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = 'combine',
  })
  buffers[bufnr].shown = shown
end

local function request(bufnr)
  local state = buffers[bufnr]
  local client = state and vim.lsp.get_client_by_id(state.client_id)
  if not client or not in_insert_mode() or config().settings.enabled == false then
    return
  end
  local tick, generation = api.nvim_buf_get_changedtick(bufnr), state.generation
  local row, col = cursor()
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = TRIGGER_AUTOMATIC }
  local ok, request_id = util.call(client, 'request', 'textDocument/inlineCompletion', params, function(err, result)
    if state.generation ~= generation then
      return
    end
    state.request_id = nil
    if err or not result or not in_insert_mode() or not unchanged(bufnr, tick, row, col) then
      return
    end
    local item = (result.items or result)[1]
    local lines, end_col
    if item then
      lines, end_col = remaining(bufnr, item, client.offset_encoding, row, col)
    end
    if lines and (#lines > 1 or lines[1] ~= '') then
      show(bufnr, { row = row, col = col, end_col = end_col, tick = tick, lines = lines, item = item })
    end
  end, bufnr)
  state.request_id = ok and request_id or nil
end

-- After typing or a cursor move: keep a ghost that still fits, else clear it and ask again when typing pauses.
local function on_move(bufnr)
  local shown = buffers[bufnr].shown
  if shown and unchanged(bufnr, shown.tick, shown.row, shown.col) then
    return
  end
  clear(bufnr)
  buffers[bufnr].timer:start(config().debounce_ms, 0, vim.schedule_wrap(function()
    if buffers[bufnr] then
      request(bufnr)
    end
  end))
end

--- Asks again now, keeping what is shown until the answer replaces it (the daemon has more at this state).
function M.refresh(bufnr)
  local state = buffers[bufnr]
  if state and not state.request_id then
    request(bufnr)
  end
end

function M.detach(bufnr)
  local state = buffers[bufnr]
  if state then
    clear(bufnr)
    state.timer:close()
    pcall(api.nvim_del_augroup_by_name, 'lookahead.ghost.' .. bufnr)
    buffers[bufnr] = nil
  end
end

function M.attach(bufnr, client)
  if buffers[bufnr] then
    return
  end
  buffers[bufnr] = { client_id = client.id, timer = vim.uv.new_timer(), generation = 0 }
  local group = api.nvim_create_augroup('lookahead.ghost.' .. bufnr, { clear = true })
  local function on(events, fn)
    api.nvim_create_autocmd(events, { group = group, buffer = bufnr, callback = function() fn(bufnr) end })
  end
  on({ 'InsertEnter', 'TextChangedI', 'CursorMovedI' }, on_move)
  on({ 'InsertLeave', 'BufLeave' }, clear)
  on({ 'BufWipeout' }, M.detach)
  api.nvim_create_autocmd('LspDetach', {
    group = group,
    buffer = bufnr,
    callback = function(args)
      if args.data.client_id == client.id then
        M.detach(bufnr)
      end
    end,
  })
end

--- Inserts the ghost text at the cursor (then runs the item's command, e.g. lookahead.accepted); false when
--- no ghost text is shown here.
function M.accept()
  local bufnr = api.nvim_get_current_buf()
  local state = buffers[bufnr]
  local shown = state and state.shown
  if not shown or not unchanged(bufnr, shown.tick, shown.row, shown.col) then
    return false
  end
  vim.schedule(function() -- called from an <expr> mapping, where the buffer cannot change
    clear(bufnr)
    local lines = shown.lines
    api.nvim_buf_set_text(bufnr, shown.row, shown.col, shown.row, shown.end_col, lines)
    api.nvim_win_set_cursor(0, { shown.row + #lines, (#lines == 1 and shown.col or 0) + #lines[#lines] })
    local client = vim.lsp.get_client_by_id(state.client_id)
    local command = shown.item.command
    if client and command then
      local params = { command = command.command, arguments = command.arguments }
      util.call(client, 'request', 'workspace/executeCommand', params, function() end, bufnr)
    end
  end)
  return true
end

--- Inserts the next word or line ('word', 'line') of the ghost text; false when none is shown here. The rest
--- is asked for again (the daemon answers it from what it holds: typed through).
function M.accept_part(kind)
  local bufnr = api.nvim_get_current_buf()
  local shown = buffers[bufnr] and buffers[bufnr].shown
  if not shown or not unchanged(bufnr, shown.tick, shown.row, shown.col) then
    return false
  end
  local text = table.concat(shown.lines, '\n')
  local part = util.next_part(text, kind)
  if part == text then
    return M.accept()
  end
  vim.schedule(function()
    clear(bufnr)
    util.insert_at(bufnr, shown.row, shown.col, part)
  end)
  return true
end

return M
