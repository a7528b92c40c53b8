-- Small helpers shared by the plugin, its fallback ghost text and its health check (Neovim 0.10+).
local M = {}

M.has_011 = vim.fn.has('nvim-0.11') == 1

--- Calls a vim.lsp.Client method: `client:m(...)` on 0.11+, `client.m(...)` on 0.10.
function M.call(client, method, ...)
  if M.has_011 then
    return client[method](client, ...)
  end
  return client[method](...)
end

--- Byte column of an LSP `character` offset in `line`, clamped to the line.
function M.byte_col(line, character, encoding)
  if encoding == 'utf-8' then
    return math.min(character, #line)
  end
  local ok, col
  if M.has_011 then
    ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, encoding == 'utf-16')
  end
  return ok and math.min(col, #line) or #line
end

--- The part of a ghost text `text` that accepting the next 'word' or 'line' takes: blanks and a word (or a
--- run of punctuation); the rest of the line (at a line end: the line break and the next line).
function M.next_part(text, kind)
  if kind == 'line' then
    local nl = text:find('\n', text:sub(1, 1) == '\n' and 2 or 1, true)
    return nl and text:sub(1, nl - 1) or text
  end
  return text:match('^%s*[%w_]+') or text:match('^%s*[^%w_%s]+') or text
end

--- Inserts `text` (lines split at \n) at (row, col) of `bufnr` and puts the cursor after it.
function M.insert_at(bufnr, row, col, text)
  local lines = vim.split(text, '\n', { plain = true })
  vim.api.nvim_buf_set_text(bufnr, row, col, row, col, lines)
  vim.api.nvim_win_set_cursor(0, { row + #lines, (#lines == 1 and col or 0) + #lines[#lines] })
end

return M
