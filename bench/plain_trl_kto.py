"""A plain TRL KTO + LoRA script: the baseline of the ``train`` row (``bench/train_kto.py``).

What a user would write without agent-rl: read KTO rows (``prompt``, ``completion``, ``label``)
from a JSONL file, load the model and tokenizer, train ``trl.KTOTrainer`` with a PEFT LoRA
config, save the adapter. Every setting comes from the command line so that the row can give it
exactly the settings ``agent-rl train kto`` uses. Prints one JSON line with the losses and
``train_runtime``.

    python bench/plain_trl_kto.py --model DIR --data kto.jsonl --out DIR --max-steps 20 --batch-size 8 --lora-r 8
"""

from __future__ import annotations

import argparse
import json
import time

STARTED = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-steps", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--lora-r", type=int, required=True)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--beta", type=float, default=0.1)
    parser.add_argument("--desirable-weight", type=float, default=1.0)
    parser.add_argument("--undesirable-weight", type=float, default=1.0)
    parser.add_argument("--max-length", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--gpu", action="store_true", help="train on the GPU (default: CPU, fp32)")
    parser.add_argument("--bf16", action="store_true", help="bf16 mixed precision (with --gpu)")
    args = parser.parse_args()

    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import KTOConfig, KTOTrainer

    with open(args.data, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    dataset = Dataset.from_list([{k: r[k] for k in ("prompt", "completion", "label")} for r in rows])
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model)
    config = KTOConfig(
        output_dir=args.out,
        learning_rate=args.lr,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=1,
        seed=args.seed,
        use_cpu=not args.gpu,
        bf16=args.bf16,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        beta=args.beta,
        desirable_weight=args.desirable_weight,
        undesirable_weight=args.undesirable_weight,
        max_length=args.max_length,
    )
    lora = LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0, target_modules="all-linear",
                      task_type="CAUSAL_LM")
    trainer = KTOTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer,
                         peft_config=lora)
    output = trainer.train()
    trainer.save_model(f"{args.out}/adapter")
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    tokens = [e["num_tokens"] for e in trainer.state.log_history if "num_tokens" in e]
    print(json.dumps({
        "steps": trainer.state.global_step,
        "first_loss": losses[0] if losses else None,
        "final_loss": losses[-1] if losses else None,
        "train_runtime": output.metrics.get("train_runtime"),
        "num_tokens": tokens[-1] if tokens else None,
        "rows": len(dataset),
        "seconds": time.perf_counter() - STARTED,
    }))


if __name__ == "__main__":
    main()
