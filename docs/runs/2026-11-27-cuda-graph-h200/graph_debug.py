"""Scratch: why the graph's replay disagreed (first try): the 0.5B config, one Step eager and one graphed over the
same prefix, compared step by step; capture variants: inference_mode or no_grad, SDPA's default or math kernel,
GQA in SDPA or the key/value heads repeated by hand."""
import sys
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache
import graph_step as gs

config = AutoConfig.from_pretrained(sys.argv[1])
device = torch.device("cuda")
torch.manual_seed(0)
with torch.device(device):
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa").eval()
prompt = torch.tensor([[(i * 7919) % config.vocab_size for i in range(gs.PREFIX)]], device=device)
for mode_name, mode in (("inference_mode", torch.inference_mode), ("no_grad", torch.no_grad)):
    for kernel_name, backends in (("default", None), ("math", [SDPBackend.MATH])):
        with mode():
            cache = DynamicCache(config=config)
            model(input_ids=prompt, past_key_values=cache, use_cache=True)
            eager = gs.Step(model, cache)
            ctx = sdpa_kernel(backends) if backends else torch.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x)
            with ctx:
                graphed = gs.Graphed(gs.Step(model, cache), device)
            worst = 0.0
            for n in range(4):
                token = torch.tensor([(n * 31) % 1000], device=device)
                position = torch.tensor([gs.PREFIX + n], device=device)
                a = eager(token, position).clone()
                b = graphed(token, position).clone()
                torch.cuda.synchronize()
                worst = max(worst, float((a - b).abs().max()))
                if n == 0:
                    print(mode_name, kernel_name, "inputs", graphed.token.tolist(), graphed.position.tolist())
            print(mode_name, kernel_name, "graph against eager, worst of 4 steps:", worst, flush=True)
