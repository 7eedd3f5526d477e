"""The processes of the GPU rows (``bench/gpu.py``): online GRPO + LoRA through agent-rl
(``build_prompt_dataset`` + ``train_grpo``) or through a plain TRL script, with the same model,
prompts, reward function and settings. Prints one JSON line (steps, train_runtime,
num_tokens, seconds).

    python bench/gpu_runner.py grpo-ours  --model DIR --db runs.duckdb --out DIR --steps 8 ...
    python bench/gpu_runner.py grpo-plain --model DIR --prompts prompts.jsonl --out DIR --steps 8 ...
"""

from __future__ import annotations

import argparse
import json
import time

STARTED = time.perf_counter()


def reward_e(prompts, completions, **kwargs):
    """Share of the letter "e" in each completion (a dense reward; text or chat messages)."""
    out = []
    for completion in completions:
        text = completion if isinstance(completion, str) else "".join(
            (m.get("content") or "") for m in completion if isinstance(m, dict))
        out.append(text.count("e") / max(1, len(text)))
    return out


def _tokens(history) -> float | None:
    values = [e["num_tokens"] for e in history if "num_tokens" in e]
    return values[-1] if values else None


def grpo_ours(args) -> dict:
    from agent_rl_plugin.train import GRPOTrainConfig, build_prompt_dataset, train_grpo

    config = GRPOTrainConfig(
        model=args.model, output_dir=args.out, learning_rate=args.lr, max_steps=args.steps,
        batch_size=args.batch_size, gradient_accumulation_steps=1, lora_r=args.lora_r, use_cpu=not args.gpu,
        bf16=args.bf16, num_generations=args.num_generations, max_completion_length=args.max_completion_length,
        logging_steps=1, report_to=[],
    )
    prompts = build_prompt_dataset(args.db)
    result = train_grpo(config, prompts, [reward_e], progress=False)
    return {"steps": result.global_step, "train_runtime": result.metrics.get("train_runtime"),
            "num_tokens": _tokens(result.log_history), "rows": result.n_rows}


def grpo_plain(args) -> dict:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    with open(args.prompts, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    dataset = Dataset.from_list(rows)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model)
    config = GRPOConfig(
        output_dir=args.out, learning_rate=args.lr, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=1, seed=42, use_cpu=not args.gpu, bf16=args.bf16, logging_steps=1,
        save_strategy="no", report_to=[], num_generations=args.num_generations,
        max_completion_length=args.max_completion_length, temperature=1.0, top_p=1.0, beta=0.0, epsilon=0.2,
        loss_type="dapo", scale_rewards="group", num_iterations=1, mask_truncated_completions=False,
        reward_weights=[1.0], log_completions=False, disable_tqdm=True,
    )
    lora = LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    trainer = GRPOTrainer(model=model, reward_funcs=[reward_e], args=config, train_dataset=dataset,
                          processing_class=tokenizer, peft_config=lora)
    trainer.remove_callback(PrinterCallback)
    output = trainer.train()
    trainer.save_model(f"{args.out}/adapter")
    return {"steps": trainer.state.global_step, "train_runtime": output.metrics.get("train_runtime"),
            "num_tokens": _tokens(trainer.state.log_history), "rows": len(dataset)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("grpo-ours", "grpo-plain"))
    parser.add_argument("--model", required=True)
    parser.add_argument("--db")
    parser.add_argument("--prompts")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lora-r", type=int, required=True)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--max-completion-length", type=int, default=64)
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--bf16", action="store_true")
    args = parser.parse_args()
    out = grpo_ours(args) if args.mode == "grpo-ours" else grpo_plain(args)
    out["seconds"] = time.perf_counter() - STARTED
    print(json.dumps(out))


if __name__ == "__main__":
    main()
