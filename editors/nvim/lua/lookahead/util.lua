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

return M
