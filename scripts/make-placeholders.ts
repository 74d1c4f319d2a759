/**
 * Draws the text-note placeholder thumbnails served at
 * /assets/player/carousel_placeholders_webp/carousel-placeholder-{kind}.webp (one per
 * placeholder_kind). Run: node --import tsx scripts/make-placeholders.ts
 */
import { mkdirSync, writeFileSync } from "node:fs";
import sharp from "sharp";

const KINDS: Record<string, [string, string]> = {
  log: ["#37474f", "LOG"], lyrics: ["#6a1b9a", "LYRICS"], memory: ["#ad1457", "MEMORY"], notes: ["#f9a825", "NOTES"],
  poem: ["#4527a0", "POEM"], prompt: ["#00695c", "PROMPT"], specification: ["#1565c0", "SPEC"], summary: ["#2e7d32", "SUMMARY"],
  tutorial: ["#e65100", "TUTORIAL"],
};

const dir = new URL("../services/gateway/assets/player/carousel_placeholders_webp/", import.meta.url);
mkdirSync(dir, { recursive: true });
for (const [kind, [color, label]] of Object.entries(KINDS)) {
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="400" height="400">
    <rect width="400" height="400" rx="32" fill="${color}"/>
    <rect x="90" y="80" width="220" height="240" rx="12" fill="#ffffff" opacity="0.92"/>
    ${[130, 165, 200, 235, 270].map((y, i) => `<rect x="115" y="${y}" width="${i === 4 ? 110 : 170}" height="12" rx="6" fill="${color}" opacity="0.55"/>`).join("")}
    <text x="200" y="365" font-family="sans-serif" font-size="34" font-weight="bold" fill="#ffffff" text-anchor="middle">${label}</text>
  </svg>`;
  const webp = await sharp(Buffer.from(svg)).webp({ quality: 85 }).toBuffer();
  writeFileSync(new URL(`carousel-placeholder-${kind}.webp`, dir), webp);
}
console.log(`wrote ${Object.keys(KINDS).length} placeholders to ${dir.pathname}`);
