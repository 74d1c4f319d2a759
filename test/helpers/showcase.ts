/**
 * A published collection with one item of every kind the player shows, made through the JSON
 * endpoint: an image (thumbnails made), a WAV tone, a video (WebM header bytes: a real <video>
 * source, not a playable clip), a web link with its preview image, notes in markdown, code and
 * plain text, a published sub-collection and an unpublished one.
 */
import sharp from "sharp";
import type { ImageServer } from "./image-server.js";
import type { TestSystem, TestUser } from "./system.js";

export interface Showcase {
  collectionId: number;
  shareUrl: string;
  /** Media ids in page order. */
  ids: { image: number; audio: number; video: number; link: number; markdown: number; code: number; plain: number; child: number; hiddenChild: number };
  childShareUrl: string;
  childCollectionId: number;
  hiddenChildName: string;
}

/** 1 s of a 440 Hz tone, 8 kHz 8-bit mono WAV. */
export function wavTone(): Buffer {
  const rate = 8000;
  const samples = Buffer.alloc(rate);
  for (let i = 0; i < rate; i++) samples[i] = 128 + Math.round(100 * Math.sin((2 * Math.PI * 440 * i) / rate));
  const h = Buffer.alloc(44);
  h.write("RIFF", 0); h.writeUInt32LE(36 + samples.length, 4); h.write("WAVE", 8);
  h.write("fmt ", 12); h.writeUInt32LE(16, 16); h.writeUInt16LE(1, 20); h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24); h.writeUInt32LE(rate, 28); h.writeUInt16LE(1, 32); h.writeUInt16LE(8, 34);
  h.write("data", 36); h.writeUInt32LE(samples.length, 40);
  return Buffer.concat([h, samples]);
}

/** The EBML header of a WebM file, padded: sniffed as video/webm. */
export function webmHeader(): Buffer {
  return Buffer.concat([Buffer.from("1a45dfa3a34286810142f7810142f2810442f381084282847765626d4287810442858102", "hex"), Buffer.alloc(4096, 1)]);
}

export async function createShowcase(sys: TestSystem, owner: TestUser, img: ImageServer, opts: { name?: string; slug?: string; fields?: Record<string, unknown>; publish?: Record<string, unknown> } = {}): Promise<Showcase> {
  const must = (body: Record<string, unknown>) => sys.must(owner.token, body);
  const name = opts.name ?? "Summer in Lisbon";
  const { collection } = await must({ op: "collections.create", name, description: "Tiles, trams & <the> sea", ...opts.fields });
  const c = collection.id as number;
  const upload = async (bytes: Buffer, filename: string, itemName: string) =>
    (await must({ op: "media.upload", collection_id: c, filename, name: itemName, content_base64: bytes.toString("base64"), content_length: bytes.length })).media.id as number;
  const png = await sharp({ create: { width: 1200, height: 900, channels: 3, background: { r: 30, g: 140, b: 200 } } }).png().toBuffer();
  const image = await upload(png, "tiles.png", "Blue tiles");
  const audio = await upload(wavTone(), "tone.wav", "A tone");
  const video = await upload(webmHeader(), "tram.webm", "Tram 28");
  const link = (await must({ op: "media.create", collection_id: c, source_url: img.url("/page.html") })).media.id as number;
  const note = async (itemName: string, text: string, mode: string) =>
    (await must({ op: "media.text_note.add", collection_id: c, name: itemName, text, display_mode: mode })).media.id as number;
  const markdown = await note("Itinerary", "# Day one\n\n**Alfama** then _Belém_. <script>alert(1)</script> [map](https://example.org/map)", "markdown");
  const code = await note("Snippet", "const x = 1 < 2;", "code");
  const plain = await note("Postcard", "Dear all,\nwish you were here.", "plain");
  const { collection: child } = await must({ op: "collections.create", name: "Sintra day trip", parent_collection_id: c });
  await must({ op: "collections.publish", collection_id: child.id, slug: `${opts.slug ?? "lisbon"}-sintra`, share_access_level: "public" });
  const hiddenChildName = "Private drafts";
  await must({ op: "collections.create", name: hiddenChildName, parent_collection_id: c });
  const published = await must({ op: "collections.publish", collection_id: c, slug: opts.slug ?? "lisbon", share_access_level: "public", ...opts.publish });
  const listed = await must({ op: "media.list", collection_id: c, limit: 100 });
  const linkRow = (id: number) => listed.media.find((m: { linked_collection_id?: number }) => m.linked_collection_id === id).id as number;
  const hidden = listed.media.find((m: { name?: string; linked_collection_id?: number }) => m.linked_collection_id && m.linked_collection_id !== child.id).id as number;
  return {
    collectionId: c,
    shareUrl: published.collection.share_url,
    ids: { image, audio, video, link, markdown, code, plain, child: linkRow(child.id), hiddenChild: hidden },
    childShareUrl: (await must({ op: "collections.share_url", collection_id: child.id })).url,
    childCollectionId: child.id,
    hiddenChildName,
  };
}
