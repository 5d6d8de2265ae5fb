package main

import (
	"bytes"
	"hash/fnv"
	"image"
	"image/color"
	"image/jpeg"
	"strings"
	"time"
)

// Quality is a stream's size: the design's sub and main streams.
type Quality string

// The two qualities of the design.
const (
	Sub  Quality = "sub"
	Main Quality = "main"
)

// size returns the picture size and frame rate of q, and the size of a
// thumbnail (the baseline snapshots of the grid).
func (q Quality) size() (w, h int, fps int) {
	switch q {
	case Main:
		return 960, 540, 8
	case Sub:
		return 320, 180, 4
	}
	return 192, 108, 1 // thumbnail
}

// thumb is the size of the grid's snapshots.
const thumb Quality = "thumb"

// drawFrame draws camera id's picture at t: a sky and floor in the camera's
// colours, a box that moves across the scene, the id, the quality and the
// time, so a viewer sees at once that the stream is live and whose it is.
func drawFrame(id string, q Quality, t time.Time) []byte {
	w, h, _ := q.size()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	hs := fnv.New32a()
	hs.Write([]byte(id))
	seed := hs.Sum32()
	base := color.RGBA{uint8(40 + seed%60), uint8(60 + (seed>>8)%80), uint8(90 + (seed>>16)%90), 255}
	horizon := h * 3 / 5
	for y := range h {
		var c color.RGBA
		if y < horizon {
			k := y * 60 / horizon
			c = color.RGBA{clamp(int(base.R) + k), clamp(int(base.G) + k), clamp(int(base.B) + k), 255}
		} else {
			k := (y - horizon) * 50 / (h - horizon)
			c = color.RGBA{clamp(70 - k), clamp(72 - k), clamp(68 - k), 255}
		}
		row := img.Pix[y*img.Stride : y*img.Stride+w*4]
		for x := 0; x < w; x++ {
			row[x*4], row[x*4+1], row[x*4+2], row[x*4+3] = c.R, c.G, c.B, 255
		}
	}
	// A box crossing the scene every 8 s, offset per camera.
	period := 8 * time.Second
	phase := float64((t.UnixNano()+int64(seed)*1e6)%int64(period)) / float64(period)
	bw, bh := w/8, h/6
	bx := int(phase*float64(w+bw)) - bw
	by := horizon - bh + h/20
	fillRect(img, bx, by, bw, bh, color.RGBA{230, 200, 60, 255})
	fillRect(img, bx+bw/6, by+bh, bw/5, h/30, color.RGBA{20, 20, 20, 255})
	fillRect(img, bx+bw*4/6, by+bh, bw/5, h/30, color.RGBA{20, 20, 20, 255})

	scale := max(1, w/320)
	white := color.RGBA{255, 255, 255, 255}
	label := strings.ToUpper(id)
	if q != thumb {
		label += " " + strings.ToUpper(string(q))
	}
	fillRect(img, 0, 0, w, 10*scale, color.RGBA{0, 0, 0, 255})
	drawText(img, 2*scale, 2*scale, scale, label, white)
	stamp := t.Format("15:04:05")
	if q != thumb {
		stamp = t.Format("2006-01-02 15:04:05.0")
	}
	fillRect(img, 0, h-10*scale, w, 10*scale, color.RGBA{0, 0, 0, 255})
	drawText(img, 2*scale, h-8*scale, scale, stamp, white)
	if q != thumb && t.UnixMilli()/500%2 == 0 {
		fillRect(img, w-8*scale, 2*scale, 5*scale, 5*scale, color.RGBA{230, 40, 40, 255}) // REC
	}

	var buf bytes.Buffer
	_ = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 70})
	return buf.Bytes()
}

func clamp(v int) uint8 { return uint8(min(255, max(0, v))) }

func fillRect(img *image.RGBA, x, y, w, h int, c color.RGBA) {
	r := image.Rect(x, y, x+w, y+h).Intersect(img.Rect)
	for yy := r.Min.Y; yy < r.Max.Y; yy++ {
		for xx := r.Min.X; xx < r.Max.X; xx++ {
			i := img.PixOffset(xx, yy)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, 255
		}
	}
}

// drawText draws s in a 5×7 pixel font, each pixel scale×scale.
func drawText(img *image.RGBA, x, y, scale int, s string, c color.RGBA) {
	for _, r := range s {
		g, ok := glyphs[r]
		if !ok {
			g = glyphs['?']
		}
		for row, bits := range g {
			for col := range 5 {
				if bits&(1<<(4-col)) != 0 {
					fillRect(img, x+col*scale, y+row*scale, scale, scale, c)
				}
			}
		}
		x += 6 * scale
	}
}

// glyphs is a 5×7 font: each row's 5 bits, left to right.
var glyphs = map[rune][7]uint8{
	' ': {}, '?': {14, 17, 1, 2, 4, 0, 4},
	'_': {0, 0, 0, 0, 0, 0, 31}, ':': {0, 12, 12, 0, 12, 12, 0}, '.': {0, 0, 0, 0, 0, 12, 12},
	'-': {0, 0, 0, 31, 0, 0, 0},
	'0': {14, 17, 19, 21, 25, 17, 14}, '1': {4, 12, 4, 4, 4, 4, 14}, '2': {14, 17, 1, 2, 4, 8, 31},
	'3': {31, 2, 4, 2, 1, 17, 14}, '4': {2, 6, 10, 18, 31, 2, 2}, '5': {31, 16, 30, 1, 1, 17, 14},
	'6': {6, 8, 16, 30, 17, 17, 14}, '7': {31, 1, 2, 4, 8, 8, 8}, '8': {14, 17, 17, 14, 17, 17, 14},
	'9': {14, 17, 17, 15, 1, 2, 12},
	'A': {14, 17, 17, 31, 17, 17, 17}, 'B': {30, 17, 17, 30, 17, 17, 30}, 'C': {14, 17, 16, 16, 16, 17, 14},
	'D': {28, 18, 17, 17, 17, 18, 28}, 'E': {31, 16, 16, 30, 16, 16, 31}, 'F': {31, 16, 16, 30, 16, 16, 16},
	'G': {14, 17, 16, 23, 17, 17, 15}, 'H': {17, 17, 17, 31, 17, 17, 17}, 'I': {14, 4, 4, 4, 4, 4, 14},
	'J': {7, 2, 2, 2, 2, 18, 12}, 'K': {17, 18, 20, 24, 20, 18, 17}, 'L': {16, 16, 16, 16, 16, 16, 31},
	'M': {17, 27, 21, 21, 17, 17, 17}, 'N': {17, 17, 25, 21, 19, 17, 17}, 'O': {14, 17, 17, 17, 17, 17, 14},
	'P': {30, 17, 17, 30, 16, 16, 16}, 'Q': {14, 17, 17, 17, 21, 18, 13}, 'R': {30, 17, 17, 30, 20, 18, 17},
	'S': {15, 16, 16, 14, 1, 1, 30}, 'T': {31, 4, 4, 4, 4, 4, 4}, 'U': {17, 17, 17, 17, 17, 17, 14},
	'V': {17, 17, 17, 17, 17, 10, 4}, 'W': {17, 17, 17, 21, 21, 21, 10}, 'X': {17, 17, 10, 4, 10, 17, 17},
	'Y': {17, 17, 17, 10, 4, 4, 4}, 'Z': {31, 1, 2, 4, 8, 16, 31},
}
